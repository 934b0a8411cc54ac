package hostile

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// pendingServer answers as pending for the first n connections, then as
// ready: upstream's wait loop, which hands out the config with its
// placeholders unresolved while the claims are pending.
type pendingServer struct {
	pending, ready *Server
	n              int

	mu    sync.Mutex
	conns int
}

func (p *pendingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.conns++
	s := p.ready
	if p.conns <= p.n {
		s = p.pending
	}
	p.mu.Unlock()
	s.ServeHTTP(w, r)
}

func (p *pendingServer) start(t *testing.T) string {
	hs := httptest.NewServer(p)
	t.Cleanup(func() { p.pending.Close(); p.ready.Close(); hs.Close() })
	return hs.URL + "/elemental/registration/tok"
}

// pendingNetwork is the seed PR's network config with its address claim
// still pending: the placeholder is there, its address not.
var pendingNetwork = strings.Replace(seedPRNetwork, `"ipAddresses":{"ip1":"192.168.122.10"}`, `"ipAddresses":{}`, 1)

// TestExplicitRetriesPendingAddresses: with
// network-config: explicit, a config whose placeholders are unresolved is a
// claim still pending, retried within --network-timeout as auto does, both
// against the seed PR's server (the config comes in MsgNetworkConfig) and
// upstream HEAD's (embedded in MsgConfig; MsgNetworkConfig closes the
// connection).
func TestExplicitRetriesPendingAddresses(t *testing.T) {
	useStub(t)
	reg := "elemental:\n    registration:\n        auth: mac\n"
	embedded := func(nc string) []byte {
		// The network keys at the top of MsgConfig, as HEAD sends them.
		var doc map[string]any
		testutil.Must(t, json.Unmarshal([]byte(nc), &doc))
		doc["configurator"] = "nmstate"
		doc["elemental"] = map[string]any{"registration": map[string]any{"auth": "mac"}}
		b, err := yaml.Marshal(doc)
		testutil.Must(t, err)
		return b
	}
	cases := map[string]*pendingServer{
		"seed-PR": {pending: &Server{Config: []byte(reg), Network: []byte(pendingNetwork)}, ready: &Server{Config: []byte(reg), Network: []byte(seedPRNetwork)}},
		"HEAD":    {pending: &Server{Config: embedded(pendingNetwork)}, ready: &Server{Config: embedded(seedPRNetwork)}},
	}
	for name, ps := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps.n = 3 // registration and the first two asks: pending
			m := node.New(t, "52:54:00:15:00:07", ps.start(t), "    network-config: explicit\n")
			var log node.Log
			// The backoff between asks runs on a fake clock: the retry
			// is what is tested, not its real waits.
			res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 20 * time.Second, Clock: retrytest.NewClock(time.Now())})
			if err != nil {
				t.Fatalf("exit %d: %v\n%s", exitcode.Of(err), err, log.String())
			}
			if res.Addresses["ip1"] != "192.168.122.10" || !res.Applied {
				t.Fatalf("result %+v\n%s", res, log.String())
			}
			ps.mu.Lock()
			conns := ps.conns
			ps.mu.Unlock()
			if conns <= ps.n || !strings.Contains(log.String(), "addresses not ready yet") {
				t.Errorf("%d connections, no retry on the pending address logged:\n%s", conns, log.String())
			}
		})
	}
}

// TestExplicitAgainstAReleasedOperator: network-config: explicit against a
// server that never announced the explicit exchange, embeds no network
// config (a MachineRegistration without a network template) and closes the
// connection on MsgNetworkConfig, as released elemental-operators do. One
// ask, then a configuration error (78) naming auto, long before
// --network-timeout; nothing written.
func TestExplicitAgainstAReleasedOperator(t *testing.T) {
	useStub(t)
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n")} // Network nil: 0x0C closes
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:15:00:0c", url, "    network-config: explicit\n")
	before := testutil.Files(t, m.Root)
	var log node.Log
	start := time.Now()
	_, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: time.Minute})
	if code := exitcode.Of(err); code != exitcode.Config {
		t.Fatalf("exit %d (%v), want 78\n%s", code, err, log.String())
	}
	for _, want := range []string{"never announced the explicit exchange", "closed the connection on MsgNetworkConfig (0x0C)", "set elemental.registration.network-config to auto"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(log.String(), "retrying in") {
		t.Errorf("the dropped ask was retried:\n%s", log.String())
	}
	// Two connections: the registration and the one explicit ask.
	if s.Hits() != 2 {
		t.Errorf("%d connections, want 2 (register, one MsgNetworkConfig)", s.Hits())
	}
	after := testutil.Files(t, m.Root)
	for p := range after {
		if strings.HasSuffix(p, ".nodereg.lock") {
			delete(after, p)
		}
	}
	if ch := testutil.Changed(before, after); len(ch) > 0 {
		t.Errorf("files changed: %v", ch)
	}
	t.Logf("%s after %s", err, time.Since(start).Round(time.Millisecond))

	// The same server with network-config: auto: no ask, no network
	// config for this machine, exit 0.
	m2 := node.New(t, "52:54:00:15:00:0d", url, "")
	hits := s.Hits()
	if _, err := runAgent(t.Context(), m2, &log, agent.Options{Deadline: 5 * time.Second}); err != nil {
		t.Fatalf("auto: %v\n%s", err, log.String())
	}
	if s.Hits() != hits+1 {
		t.Errorf("auto: %d connections, want 1", s.Hits()-hits)
	}
}
