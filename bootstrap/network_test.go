package bootstrap

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil"
)

func TestDecideBootstrap(t *testing.T) {
	down := errors.New("connect: network is unreachable")
	for _, c := range []struct {
		name        string
		hasConfig   bool
		unreachable error
		digest      string
		applicator  bool
		want        bool
		reason      string
		// dialled: the reachability question was asked.
		dialled bool
	}{
		{"no DHCP, nothing applied: bring it up", true, down, "", false, true, "not reachable (connect: network is unreachable)", true},
		{"server reachable (DHCP works)", true, nil, "", false, false, "reachable as the node is", true},
		{"unreachable, config applied (state)", true, down, "sha256:abc", false, false, "applied (state file)", false},
		{"unreachable, applicator under /oem", true, down, "", true, false, "applicator of ours is under /oem", false},
		{"no bootstrap config", false, down, "", false, false, "no " + Key, false},
		{"reachable and applied", true, nil, "sha256:abc", true, false, "applied (state file)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dialled := false
			d := Decide(c.hasConfig, c.digest, c.applicator, func() error { dialled = true; return c.unreachable })
			if d.Needed != c.want || !strings.Contains(d.Reason, c.reason) {
				t.Errorf("Decide = %+v, want needed %v with a reason containing %q", d, c.want, c.reason)
			}
			if dialled != c.dialled {
				t.Errorf("reachability asked: %v, want %v", dialled, c.dialled)
			}
		})
	}
}

// Only a network failure makes the server unreachable: a listener answers,
// and a refused connection means the network works (a bootstrap address
// would not change that).
func TestServerUnreachableOnlyOnNetworkFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	up := "https://" + ln.Addr().String() + "/elemental/registration/x"
	if err := ServerUnreachable(t.Context(), up, time.Second); err != nil {
		t.Errorf("listening server: %v", err)
	}
	ln.Close()
	if err := ServerUnreachable(t.Context(), up, time.Second); err != nil {
		t.Errorf("refused connection counted as unreachable: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ServerUnreachable(ctx, up, time.Second); err == nil {
		t.Error("a dial that could not happen counted as reachable")
	}
}
