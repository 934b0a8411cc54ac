package ipam

import (
	"errors"
	"math"
	"net/netip"
	"strings"
	"testing"
)

func mustPool(t *testing.T, s Spec) *Pool {
	t.Helper()
	p, err := New(s)
	if err != nil {
		t.Fatalf("New(%+v): %v", s, err)
	}
	return p
}

func rangesString(p *Pool) string {
	var parts []string
	for _, r := range p.Ranges() {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ",")
}

func TestPoolParsing(t *testing.T) {
	cases := []struct {
		name  string
		spec  Spec
		want  string
		total uint64
	}{
		{"range with gateway outside", Spec{Name: "a", Addresses: []string{"192.168.122.150-192.168.122.200"}, Prefix: 24, Gateway: "192.168.122.1"},
			"192.168.122.150-192.168.122.200", 51},
		{"cidr drops network, broadcast, gateway", Spec{Name: "a", Addresses: []string{"10.0.0.0/29"}, Prefix: 29, Gateway: "10.0.0.1"},
			"10.0.0.2-10.0.0.6", 5},
		{"reserved kept on request", Spec{Name: "a", Addresses: []string{"10.0.0.0/30"}, Prefix: 30, AllocateReservedIPAddresses: true},
			"10.0.0.0-10.0.0.3", 4},
		{"single addresses, excluded range and single", Spec{Name: "a",
			Addresses:         []string{"10.0.0.20", "10.0.0.10-10.0.0.15", "10.0.0.16"},
			ExcludedAddresses: []string{"10.0.0.12-10.0.0.13", "10.0.0.20"}, Prefix: 24},
			"10.0.0.10-10.0.0.11,10.0.0.14-10.0.0.16", 5},
		{"overlapping entries merge", Spec{Name: "a", Addresses: []string{"10.0.0.8/30", "10.0.0.9-10.0.0.20"}, Prefix: 24},
			"10.0.0.8-10.0.0.20", 13},
		{"excluded cidr", Spec{Name: "a", Addresses: []string{"10.1.0.0/24"}, Prefix: 24, ExcludedAddresses: []string{"10.1.0.0/25"}},
			"10.1.0.128-10.1.0.254", 127},
		{"ipv6 range, gateway inside", Spec{Name: "v6", Addresses: []string{"2001:db8::10-2001:db8::14"}, Prefix: 64, Gateway: "2001:db8::12"},
			"2001:db8::10-2001:db8::11,2001:db8::13-2001:db8::14", 4},
		{"ipv6 cidr drops only the network address", Spec{Name: "v6", Addresses: []string{"2001:db8::/126"}, Prefix: 126},
			"2001:db8::1-2001:db8::3", 3},
		{"ipv6 /64 saturates total", Spec{Name: "v6", Addresses: []string{"2001:db8::/64"}, Prefix: 64, AllocateReservedIPAddresses: true},
			"2001:db8::-2001:db8::ffff:ffff:ffff:ffff", math.MaxUint64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustPool(t, c.spec)
			if got := rangesString(p); got != c.want {
				t.Errorf("ranges = %s, want %s", got, c.want)
			}
			if got := p.Total(); got != c.total {
				t.Errorf("total = %d, want %d", got, c.total)
			}
		})
	}
}

func TestPoolValidation(t *testing.T) {
	cases := []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "a", Prefix: 24}, "addresses: empty"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1", "nonsense"}, Prefix: 24}, `addresses[1]: "nonsense" is not an IP address`},
		{Spec{Name: "a", Addresses: []string{"10.0.0.9-10.0.0.1"}, Prefix: 24}, "ends before it starts"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1", "2001:db8::1"}, Prefix: 24}, "addresses[1]"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1"}, Prefix: 33}, "prefix: 33 out of range 0..32"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1", "10.0.1.1"}, Prefix: 24}, `addresses[1]: "10.0.1.1" is outside subnet 10.0.0.0/24`},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1"}, Prefix: 24, Gateway: "2001:db8::1"}, "gateway:"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1"}, Prefix: 24, Gateway: "gw"}, `gateway: "gw" is not an IP address`},
		{Spec{Name: "a", Addresses: []string{"10.0.0.1"}, Prefix: 24, ExcludedAddresses: []string{"10.0.0.0/33"}}, "excludedAddresses[0]"},
		{Spec{Addresses: []string{"10.0.0.1"}, Prefix: 24}, "name: empty"},
		// A gateway the hosts cannot reach on-link.
		{Spec{Name: "a", Addresses: []string{"192.168.122.150-192.168.122.200"}, Prefix: 24, Gateway: "192.168.123.1"},
			`gateway: "192.168.123.1" is outside subnet 192.168.122.0/24`},
		{Spec{Name: "v6", Addresses: []string{"2001:db8::10"}, Prefix: 64, Gateway: "2001:db9::1"}, `gateway: "2001:db9::1" is outside subnet 2001:db8::/64`},
	}
	for _, c := range cases {
		_, err := New(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want error containing %q", c.spec, err, c.want)
		}
	}
}

func TestAllocateLowestFree(t *testing.T) {
	p := mustPool(t, Spec{Name: "a", Addresses: []string{"192.168.122.150-192.168.122.153", "192.168.122.160"}, Prefix: 24,
		ExcludedAddresses: []string{"192.168.122.151"}})
	inUse := map[netip.Addr]bool{}
	want := []string{"192.168.122.150", "192.168.122.152", "192.168.122.153", "192.168.122.160"}
	for _, w := range want {
		a, err := p.Allocate(lookup(inUse))
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != w {
			t.Fatalf("allocated %s, want %s", a, w)
		}
		inUse[a] = true
	}
	_, err := p.Allocate(lookup(inUse))
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), `pool "a"`) {
		t.Fatalf("full pool: err = %v, want ErrExhausted naming the pool", err)
	}
	// A freed address is the lowest free one again.
	delete(inUse, netip.MustParseAddr("192.168.122.152"))
	if a, _ := p.Allocate(lookup(inUse)); a.String() != "192.168.122.152" {
		t.Fatalf("after release got %s, want 192.168.122.152", a)
	}
}

func TestAllocateIPv6SkipsUsed(t *testing.T) {
	p := mustPool(t, Spec{Name: "v6", Addresses: []string{"2001:db8::/64"}, Prefix: 64, Gateway: "2001:db8::1"})
	inUse := map[netip.Addr]bool{netip.MustParseAddr("2001:db8::2"): true, netip.MustParseAddr("2001:db8::3"): true}
	a, err := p.Allocate(lookup(inUse))
	if err != nil || a.String() != "2001:db8::4" {
		t.Fatalf("got %v, %v; want 2001:db8::4", a, err)
	}
	if !p.Contains(a) || p.Contains(netip.MustParseAddr("2001:db8::1")) || p.Contains(netip.MustParseAddr("2001:db8::")) {
		t.Fatal("Contains disagrees with gateway/network exclusion")
	}
}

func BenchmarkAllocateFullish(b *testing.B) {
	p, _ := New(Spec{Name: "a", Addresses: []string{"10.0.0.0/16"}, Prefix: 16})
	inUse := map[netip.Addr]bool{}
	for i := 0; i < 5000; i++ {
		a, _ := p.Allocate(lookup(inUse))
		inUse[a] = true
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Allocate(lookup(inUse)); err != nil {
			b.Fatal(err)
		}
	}
}

func lookup(m map[netip.Addr]bool) func(netip.Addr) bool {
	return func(a netip.Addr) bool { return m[a] }
}

// The gateway, the network and the IPv4 broadcast address are never handed
// out, however full the pool gets.
func TestAllocateNeverReservedOrGateway(t *testing.T) {
	p := mustPool(t, Spec{Name: "a", Addresses: []string{"10.0.0.0/28"}, Prefix: 28, Gateway: "10.0.0.7"})
	inUse := map[netip.Addr]bool{}
	for {
		a, err := p.Allocate(lookup(inUse))
		if errors.Is(err, ErrExhausted) {
			break
		}
		switch a.String() {
		case "10.0.0.0", "10.0.0.7", "10.0.0.15":
			t.Fatalf("allocated reserved or gateway address %s", a)
		}
		inUse[a] = true
	}
	if len(inUse) != 13 {
		t.Fatalf("%d addresses handed out, want 16-3 = 13", len(inUse))
	}
}

func TestOverlap(t *testing.T) {
	cases := []struct {
		a, b Spec
		want string // "" for none
	}{
		{Spec{Name: "a", Addresses: []string{"10.8.0.10-10.8.0.11"}, Prefix: 24}, Spec{Name: "b", Addresses: []string{"10.8.0.10-10.8.0.11"}, Prefix: 24}, "10.8.0.10"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.40-10.0.0.50"}, Prefix: 24}, Spec{Name: "b", Addresses: []string{"10.0.0.40-10.0.0.60"}, Prefix: 24}, "10.0.0.40"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.40-10.0.0.50"}, Prefix: 24}, Spec{Name: "b", Addresses: []string{"10.0.0.20-10.0.0.30", "10.0.0.45-10.0.0.99"}, Prefix: 24}, "10.0.0.45"},
		// Excluded addresses are not shared.
		{Spec{Name: "a", Addresses: []string{"10.0.0.40-10.0.0.50"}, Prefix: 24, ExcludedAddresses: []string{"10.0.0.40-10.0.0.49"}}, Spec{Name: "b", Addresses: []string{"10.0.0.30-10.0.0.49"}, Prefix: 24}, ""},
		// One pool's gateway inside the other's range.
		{Spec{Name: "a", Addresses: []string{"10.0.0.40-10.0.0.50"}, Prefix: 24, Gateway: "10.0.0.1"}, Spec{Name: "b", Addresses: []string{"10.0.0.0/28"}, Prefix: 24}, "10.0.0.1"},
		{Spec{Name: "a", Addresses: []string{"10.0.0.40-10.0.0.50"}, Prefix: 24, Gateway: "10.0.0.1"}, Spec{Name: "b", Addresses: []string{"10.0.0.60-10.0.0.70"}, Prefix: 24, Gateway: "10.0.0.1"}, ""},
		{Spec{Name: "a", Addresses: []string{"10.0.0.0/24"}, Prefix: 24}, Spec{Name: "b", Addresses: []string{"2001:db8::/64"}, Prefix: 64}, ""},
	}
	for i, c := range cases {
		a, b := mustPool(t, c.a), mustPool(t, c.b)
		for _, order := range [][2]*Pool{{a, b}, {b, a}} {
			addr, ok := Overlap(order[0], order[1])
			got := ""
			if ok {
				got = addr.String()
			}
			if got != c.want {
				t.Errorf("case %d: Overlap = %q, want %q", i, got, c.want)
			}
		}
	}
}

// AllocateFrom starts its walk at the cursor, across ranges, and never
// hands out an address below it or outside the pool.
func TestAllocateFrom(t *testing.T) {
	p := mustPool(t, Spec{Name: "a", Addresses: []string{"10.0.0.10-10.0.0.12", "10.0.0.20-10.0.0.21"}, Prefix: 24})
	inUse := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.20"): true}
	for from, want := range map[string]string{"": "10.0.0.10", "10.0.0.11": "10.0.0.11", "10.0.0.13": "10.0.0.21", "10.0.0.1": "10.0.0.10"} {
		var f netip.Addr
		if from != "" {
			f = netip.MustParseAddr(from)
		}
		a, err := p.AllocateFrom(f, lookup(inUse))
		if err != nil || a.String() != want {
			t.Errorf("from %q: %v, %v; want %s", from, a, err, want)
		}
	}
	if _, err := p.AllocateFrom(netip.MustParseAddr("10.0.0.22"), lookup(inUse)); !errors.Is(err, ErrExhausted) {
		t.Errorf("from past the last range: %v, want ErrExhausted", err)
	}
	if _, err := p.AllocateFrom(netip.MustParseAddr("2001:db8::1"), lookup(inUse)); !errors.Is(err, ErrExhausted) {
		t.Errorf("an IPv6 cursor on an IPv4 pool: %v, want ErrExhausted (every IPv4 address is below it)", err)
	}
}
