package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/testutil"
)

// The whole agent against a server that refuses its first registration
// with elemental-operator's Kubernetes conflict (docs/protocol.md 7.5: 3 of 50 real
// machines ended at 78 on it): the run retries it after a backoff and
// registers, exit 0, and its log keeps the server's text.
func TestKubernetesConflictIsRetried(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	rs.conflict = 1 // every machine's first registration
	rs.restart()
	m := newMachine(t, "52:54:00:00:09:01", rs.url())
	var log testutil.Log
	var waits []time.Duration
	clock := retrytest.NewClock(time.Now())
	res, err := m.run(func(o *agent.Options) {
		o.Log = log.Entry()
		o.Clock = clock
	})
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Fatalf("after the conflict: %s\n%s", got, log.String())
	}
	waits = clock.Waits()
	if len(waits) == 0 || waits[0] < 800*time.Millisecond || waits[0] > 1200*time.Millisecond {
		t.Errorf("waits %v, want the first the backoff's jittered 1 s step", waits)
	}
	if !strings.Contains(log.String(), "the object has been modified; please apply your changes to the latest version and try again") {
		t.Errorf("the log does not show the conflict the run met:\n%s", log.String())
	}
}
