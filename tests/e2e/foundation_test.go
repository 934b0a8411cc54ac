package e2e

import (
	"bytes"
	"context"
	"errors"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/testutil"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/protocol"
)

func address(t *testing.T, res *agent.Result, err error) string {
	t.Helper()
	if err != nil {
		t.Fatalf("agent run: %v", err)
	}
	return res.Addresses["inventory-ip"]
}

// Two machines get .150 and .151; the first registers again and keeps .150;
// after a restart of regserver a third gets .152.
func TestAddressesAreStableAcrossUpdatesAndRestarts(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m1 := newMachine(t, "52:54:00:00:00:01", rs.url())
	m2 := newMachine(t, "52:54:00:00:00:02", rs.url())

	res, err := m1.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" || res.Updated {
		t.Errorf("first machine: %s updated=%v, want 192.168.122.150 as a new registration", got, res.Updated)
	}
	if res.Configurator != protocol.ConfiguratorNmstate {
		t.Errorf("configurator %q", res.Configurator)
	}
	res, err = m2.run(nil)
	if got := address(t, res, err); got != "192.168.122.151" {
		t.Errorf("second machine: %s, want 192.168.122.151", got)
	}
	res, err = m1.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" || !res.Updated {
		t.Errorf("first machine again: %s updated=%v, want 192.168.122.150 via MsgUpdate", got, res.Updated)
	}
	rs.restart()
	m3 := newMachine(t, "52:54:00:00:00:03", rs.url())
	res, err = m3.run(nil)
	if got := address(t, res, err); got != "192.168.122.152" {
		t.Errorf("third machine after restart: %s, want 192.168.122.152", got)
	}
	// The server's view agrees with what the agents got.
	byAddr := map[string]int{}
	for _, c := range rs.claims() {
		byAddr[c.Address]++
	}
	for _, a := range []string{"192.168.122.150", "192.168.122.151", "192.168.122.152"} {
		if byAddr[a] != 1 {
			t.Errorf("server holds %s %d times, want once (claims %v)", a, byAddr[a], byAddr)
		}
	}
}

func TestPoolExhaustedEndsWithExit75NamingPool(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.151", nmstateTemplate), 0)
	for i, mac := range []string{"52:54:00:00:01:01", "52:54:00:00:01:02"} {
		if _, err := newMachine(t, mac, rs.url()).run(nil); err != nil {
			t.Fatalf("machine %d: %v", i+1, err)
		}
	}
	m3 := newMachine(t, "52:54:00:00:01:03", rs.url())
	before := testutil.Tree(t, m3.Root)
	_, err := m3.run(nil)
	if code := exitcode.Of(err); code != exitcode.TempFail {
		t.Fatalf("exit %d (%v), want 75", code, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "PoolExhausted") || !strings.Contains(msg, "pool-a") {
		t.Errorf("error does not name PoolExhausted and the pool: %v", err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m3.Root)); d != "" {
		t.Errorf("failed run changed the root:\n%s", d)
	}
}

func TestAllocationDelay(t *testing.T) {
	// The server's delay is real time (its hint is whole seconds): one
	// second is the shortest that still makes the agent wait.
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), time.Second)
	m := newMachine(t, "52:54:00:00:02:01", rs.url())
	start := time.Now()
	res, err := m.run(nil)
	if got := address(t, res, err); got != "192.168.122.150" {
		t.Errorf("after waiting: %s", got)
	}
	t.Logf("waited %s for a 1 s allocation delay", time.Since(start).Round(time.Millisecond))

	// A network timeout shorter than the delay: a server of its own whose
	// delay no loaded machine outlasts, where the 1 s one could pass
	// between the claim and the agent's first ask.
	slow := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), time.Hour)
	m2 := newMachine(t, "52:54:00:00:02:02", slow.url())
	before := testutil.Tree(t, m2.Root)
	_, err = m2.run(func(o *agent.Options) { o.NetworkTimeout = 300 * time.Millisecond })
	if code := exitcode.Of(err); code != exitcode.TempFail {
		t.Fatalf("deadline shorter than the delay: exit %d (%v), want 75", code, err)
	}
	if !strings.Contains(err.Error(), "WaitingForIPAddress") || !strings.Contains(err.Error(), "-inventory-ip") {
		t.Errorf("error does not name the pending claim: %v", err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m2.Root)); d != "" {
		t.Error("timed-out run changed the root")
	}
}

// TestPlaceholderWithoutPoolExits78: regserver refuses such a template at
// start, so a server of our own stands in for one that sends it anyway
// (announcing the explicit exchange, which makes the config final).
func TestPlaceholderWithoutPoolExits78(t *testing.T) {
	nc := pendingNetwork()
	nc.IPAddresses["ip"] = "192.168.122.150"
	nc.Config["routes"] = protocol.RawValue{Value: map[string]any{"config": []any{map[string]any{
		"destination": "0.0.0.0/0", "next-hop-address": "192.168.122.1", "next-hop-interface": "{uplink}",
	}}}}
	h := &fixedHandler{network: nc, announce: true}
	m := newMachine(t, "52:54:00:00:03:01", startFixed(t, h))
	rejectedUnchanged(t, m, "{uplink}", "the placeholder")
}

// fixedHandler serves one network config and records whether the client
// ever asked with 0x0C.
type fixedHandler struct {
	mu       sync.Mutex
	network  *protocol.NetworkConfig
	announce bool
	asked    int // MsgNetworkConfig received
	gets     int
}

func (h *fixedHandler) Update(context.Context, *protocol.ServerSession) error { return nil }

func (h *fixedHandler) Get(context.Context, *protocol.ServerSession) (*protocol.ConfigReply, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gets++
	return &protocol.ConfigReply{Network: h.network, ExplicitNetworkConfig: h.announce}, nil
}

func (h *fixedHandler) NetworkConfig(context.Context, *protocol.ServerSession) (*protocol.NetworkConfig, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	return h.network, nil
}

func startFixed(t *testing.T, h protocol.SessionHandler) string {
	useStubNmstatectl(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = protocol.Accept(w, r, protocol.ServerOptions{Auth: []protocol.ServerAuthenticator{protocol.PlainServer{}}}, h)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/t"
}

func pendingNetwork() *protocol.NetworkConfig {
	// What an upstream server sends while a claim is pending: the
	// placeholder is still there and ipAddresses lacks the name.
	return &protocol.NetworkConfig{
		Configurator: protocol.ConfiguratorNmstate,
		IPAddresses:  map[string]string{},
		Config: map[string]protocol.RawValue{"interfaces": {Value: []any{map[string]any{
			"name": node.NIC, "type": "ethernet", "state": "up",
			"ipv4": map[string]any{"enabled": true, "address": []any{map[string]any{"ip": "{ip}", "prefix-length": 24}}},
		}}}},
	}
}

func TestNeverSends0x0CToAServerThatDidNotAnnounce(t *testing.T) {
	h := &fixedHandler{network: pendingNetwork()}
	m := newMachine(t, "52:54:00:00:04:01", startFixed(t, h))
	// The fake clock makes the re-registration's backoff instant.
	_, err := m.run(func(o *agent.Options) {
		o.NetworkTimeout = 1500 * time.Millisecond
		o.Clock = retrytest.NewClock(time.Now())
	})
	if code := exitcode.Of(err); code != exitcode.TempFail {
		t.Errorf("pending placeholders from an upstream-like server: exit %d (%v), want 75", code, err)
	}
	if h.asked != 0 {
		t.Errorf("agent sent MsgNetworkConfig %d times to a server that did not announce it", h.asked)
	}
	if h.gets < 2 {
		t.Errorf("agent asked %d times; it should ask again by registering", h.gets)
	}

	// A server announcing it: now the agent asks explicitly.
	nc := pendingNetwork()
	nc.IPAddresses["ip"] = "10.1.2.3"
	h2 := &explicitOnly{fixedHandler: &fixedHandler{announce: true}, explicit: nc}
	m2 := newMachine(t, "52:54:00:00:04:02", startFixed(t, h2))
	res, err := m2.run(nil)
	if err != nil || res.Addresses["ip"] != "10.1.2.3" {
		t.Fatalf("explicit ask: %+v %v", res, err)
	}
	if h2.asked != 1 {
		t.Errorf("announced server got %d explicit asks, want 1", h2.asked)
	}
}

// explicitOnly embeds nothing in MsgConfig and answers 0x0C with explicit.
type explicitOnly struct {
	*fixedHandler
	explicit *protocol.NetworkConfig
}

func (h *explicitOnly) NetworkConfig(ctx context.Context, s *protocol.ServerSession) (*protocol.NetworkConfig, error) {
	h.fixedHandler.NetworkConfig(ctx, s)
	return h.explicit, nil
}

func TestAddressThatIsNotAnIPIsRejected(t *testing.T) {
	nc := pendingNetwork()
	nc.IPAddresses["ip"] = "192.168.1.5\n  evil: 1"
	h := &fixedHandler{network: nc, announce: true}
	m := newMachine(t, "52:54:00:00:05:01", startFixed(t, h))
	rejectedUnchanged(t, m, "ip", "the field")
}

// rejectedUnchanged runs m against a server whose config must be refused:
// exit 78, an error naming want (what), and the root as it was.
func rejectedUnchanged(t *testing.T, m *machine, want, what string) {
	t.Helper()
	before := testutil.Tree(t, m.Root)
	_, err := m.run(nil)
	if code := exitcode.Of(err); code != exitcode.Config {
		t.Fatalf("exit %d (%v), want 78", code, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error does not name %s: %v", what, err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m.Root)); d != "" {
		t.Error("rejected config changed the root")
	}
}

func TestDryRunLeavesRootIdentical(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:06:01", rs.url())
	// A previous run left state behind: dry-run must not touch it either.
	if _, err := m.run(nil); err != nil {
		t.Fatal(err)
	}
	before := testutil.Tree(t, m.Root)
	var out bytes.Buffer
	res, err := m.run(func(o *agent.Options) { o.DryRun = true; o.Out = &out })
	if err != nil {
		t.Fatal(err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m.Root)); d != "" {
		t.Errorf("dry run changed the root:\n%s", d)
	}
	if res.Applied {
		t.Error("dry run reports an applied config")
	}
	for _, want := range []string{"192.168.122.150", "enp1s0", "nothing written"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry-run output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMissingConfigExits78(t *testing.T) {
	m := newMachine(t, "52:54:00:00:07:01", "http://127.0.0.1:1/elemental/registration/x")
	_, err := m.run(func(o *agent.Options) { o.ConfigPath = "/nonexistent.yaml" })
	var pe *agent.PhaseError
	if exitcode.Of(err) != exitcode.Config || !errors.As(err, &pe) || pe.Phase != agent.PhaseConfig {
		t.Errorf("missing config: %v", err)
	}
}
