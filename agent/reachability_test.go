package agent

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/protocol"
)

// The check after a live apply retries for Options.ReachabilityWindow on
// the run's clock, DefaultReachabilityWindow when unset, and then fails
// with the deadline: the window a cut-off network waits before rollback.
func TestReachabilityWindow(t *testing.T) {
	// A port nothing listens on: every attempt is refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/elemental/registration/x"
	ln.Close()

	for _, c := range []struct {
		window, want time.Duration
	}{
		{0, DefaultReachabilityWindow},
		{3 * time.Second, 3 * time.Second},
	} {
		clock := retrytest.NewClock(time.Now())
		cfg := &protocol.Config{}
		cfg.Elemental.Registration.URL = url
		e := newEnv(Options{ReachabilityWindow: c.window, Clock: clock})
		err := e.serverReachable(t.Context(), cfg.Elemental.Registration)
		if !errors.Is(err, retry.ErrDeadline) {
			t.Fatalf("window %s: %v, want the retry deadline", c.window, err)
		}
		var waited time.Duration
		for _, w := range clock.Waits() {
			waited += w
		}
		if waited != c.want {
			t.Errorf("window %s: waited %s in all (%v), want %s", c.window, waited, clock.Waits(), c.want)
		}
	}
}
