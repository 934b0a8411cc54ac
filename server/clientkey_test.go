package server

import "testing"

// Per-client limits key an IPv6 client by its /64: addresses of one /64
// share one allowance, another /64 and each IPv4 address have their own.
func TestClientLimitsKeyIPv6Per64(t *testing.T) {
	l := newClientLimits(Options{MaxClientSessions: 1})
	for _, c := range []struct {
		remote string
		want   bool
	}{
		{"[2001:db8:1:2::1]:4000", true},
		{"[2001:db8:1:2:ffff:ffff:ffff:fffe]:4001", false}, // same /64
		{"[2001:db8:1:2::3%eth0]:4002", false},             // a zone changes nothing
		{"[2001:db8:1:3::1]:4003", true},                   // the next /64
		{"192.0.2.1:4004", true},
		{"192.0.2.2:4005", true},
		{"[::ffff:192.0.2.1]:4006", false}, // IPv4-mapped is the IPv4 client
	} {
		if got := l.enter(clientAddr(c.remote)); got != c.want {
			t.Errorf("%s: entered %v, want %v", c.remote, got, c.want)
		}
	}
	if a, b := clientAddr("[2001:db8:1:2::1]:1"), clientAddr("[2001:db8:1:2::2]:1"); a != b || a.String() != "2001:db8:1:2::" {
		t.Errorf("keys %s and %s, want both 2001:db8:1:2::", a, b)
	}
}
