package agent

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
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
		err := e.serverReachable(t.Context(), e.phase(PhaseApply, redactor{}), cfg.Elemental.Registration)
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

// probedServer is a scriptedServer whose plain GETs (what the reachability
// check sends) are counted and answered with status.
type probedServer struct {
	scriptedServer
	status int
	probes atomic.Int32
}

func (s *probedServer) start(t *testing.T) string {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !protocol.IsWebSocketUpgrade(r) {
			s.probes.Add(1)
			w.WriteHeader(s.status)
			return
		}
		_ = protocol.Accept(w, r, protocol.ServerOptions{Auth: []protocol.ServerAuthenticator{protocol.PlainServer{}}, Log: testutil.TestLog(t)}, s)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/token"
}

// A reply that moves the registration URL to a second server of its own
// and sends a config after which only that one answers: the check asks
// the server of the node's own config, as the next boot will, so the
// apply is rolled back. Asking the moved URL passed it, and the node was
// stranded at the next boot. The move is logged with both URLs, and the
// token of neither.
func TestReachabilityAsksTheConfiguredServer(t *testing.T) {
	t.Setenv(host.EnvNmstatectl, testbin.NmstatectlStub(t))
	moved := &probedServer{status: http.StatusOK}
	movedURL := moved.start(t)
	movedURL = strings.Replace(movedURL, "/token", "/moved-token", 1)
	reply := &protocol.ConfigReply{Network: nmstateConfig(t)}
	reply.Config.Elemental.Registration = protocol.Registration{URL: movedURL, Auth: "mac"}
	moved.script = script{gets: []answer{{reply: reply}}}
	// The configured server registers the node, and the new network cuts
	// it off: its answer to the check is what a cut-off server gives.
	configured := &probedServer{status: http.StatusServiceUnavailable}
	configured.script = script{gets: []answer{{reply: reply}}}
	configuredURL := configured.start(t)

	m := node.New(t, "52:54:00:aa:00:37", configuredURL, "    no-smbios: true\n")
	var log testutil.Log
	_, err := Run(t.Context(), Options{
		Root: m.Root, Runner: m.Runner(), Clock: retrytest.NewClock(time.Now()), Log: log.Entry(),
		Deadline: time.Minute, NetworkTimeout: time.Minute, ReachabilityWindow: 2 * time.Second,
	})
	if !errors.Is(err, apply.ErrRolledBack) || exitcode.Of(err) != exitcode.TempFail {
		t.Fatalf("run: %v (exit %d), want the apply rolled back with exit 75\n%s", err, exitcode.Of(err), log.String())
	}
	if configured.probes.Load() == 0 || moved.probes.Load() != 0 {
		t.Errorf("the check asked the configured server %d times and the moved one %d times, want only the configured one",
			configured.probes.Load(), moved.probes.Load())
	}
	st, _, err := state.Load(host.Root(m.Root), host.StateFile)
	testutil.Must(t, err)
	if st.NetworkDigest != "" || st.NetworkErrorKind != netreport.KindRolledBack {
		t.Errorf("state %+v, want nothing applied and the rollback kept", st)
	}
	var warned string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "moves elemental.registration.url") {
			warned = l
		}
	}
	if !strings.Contains(warned, "level=warning") || !strings.Contains(warned, protocol.RedactURL(configuredURL)) || !strings.Contains(warned, protocol.RedactURL(movedURL)) {
		t.Errorf("no warning naming both URLs:\n%s", log.String())
	}
	if strings.Contains(warned, "moved-token") || strings.Contains(warned, "/token") {
		t.Errorf("the warning prints a token: %s", warned)
	}
}
