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

// TestExplicitRetriesPendingAddresses: issue 21 item 7. With
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
			res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 20 * time.Second})
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
