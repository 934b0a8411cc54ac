package hostile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/protocol"
)

// seedPRNetwork is the seed PR server's explicit answer (docs/protocol.md §7.3),
// compact JSON without configurator, for the machine's one NIC (node.NIC).
const seedPRNetwork = `{"ipAddresses":{"ip1":"192.168.122.10"},"config":{"interfaces":[{"name":"` + node.NIC + `","type":"ethernet","state":"up","ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"{ip1}","prefix-length":24}]}}],"routes":{"config":[{"destination":"0.0.0.0/0","next-hop-interface":"` + node.NIC + `","next-hop-address":"192.168.122.1"}]}}}`

func useStub(t *testing.T) {
	t.Helper()
	t.Setenv(host.EnvNmstatectl, testbin.Build(t, "./tests/stubs/nmstatectl"))
}

func runAgent(ctx context.Context, m *node.Machine, log *node.Log, o agent.Options) (*agent.Result, error) {
	o.Root, o.Out, o.Log, o.Runner, o.Version = m.Root, log, log.Entry(), m.Runner(), "hostile"
	if o.SessionDeadline == 0 {
		o.SessionDeadline = 2 * time.Second
	}
	return agent.Run(ctx, o)
}

// TestAgentRefusesAliasBomb: the alias-bomb reply ends the run at
// the register phase with the budget named, and the machine's files are
// as they were.
func TestAgentRefusesAliasBomb(t *testing.T) {
	useStub(t)
	s := &Server{Config: issueReply()}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:0c:00:01", url, "")
	m.WriteState(t, "emulatedTPMSeed: 5\n")
	before := testutil.Files(t, m.Root)
	var log node.Log
	// The backoff runs on a fake clock: the 1 s retry deadline counts
	// the waits, so the refused attempts cost no real time.
	_, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: time.Second, NetworkTimeout: time.Second, Clock: retrytest.NewClock(time.Now())})
	// Each attempt is refused for its size (a hard deadline may cut the
	// last one elsewhere: the log has them all).
	var pe *agent.PhaseError
	if !errors.As(err, &pe) || pe.Phase != agent.PhaseRegister || !strings.Contains(log.String(), protocol.ErrReplyTooLarge.Error()) {
		t.Fatalf("got %v\n%s", err, log.String())
	}
	// The state lock's file may appear; nothing else may change.
	after := testutil.Files(t, m.Root)
	delete(after, filepath.Join(filepath.Dir(node.StatePath), ".nodereg.lock"))
	if ch := testutil.Changed(before, after); len(ch) > 0 {
		t.Errorf("files changed by a refused reply: %v", ch)
	}
	t.Logf("%s (%d attempts)", err, s.Hits())
}

// TestAgentAppliesSeedPRExplicitReply: with network-config: explicit, the
// seed PR server's answer is applied as nmstate (docs/protocol.md §7.4), not
// taken for "no network config".
func TestAgentAppliesSeedPRExplicitReply(t *testing.T) {
	useStub(t)
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:0c:00:02", url, "    network-config: explicit\n")
	var log node.Log
	res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res.Configurator != protocol.ConfiguratorNmstate || res.Addresses["ip1"] != "192.168.122.10" || !res.Applied {
		t.Fatalf("result %+v\n%s", res, log.String())
	}
	calls, err := os.ReadFile(m.StubDir + "/calls.jsonl")
	if err != nil || !strings.Contains(string(calls), "192.168.122.10") {
		t.Errorf("nmstatectl was not given the address: %v\n%s", err, calls)
	}
}

// TestAgentWarnsUnusedNetworkConfig: a network config that carries a
// config but configurator none (in MsgConfig, or as the explicit reply) is
// a warning in the run's log, and nothing is applied: never a silent drop.
func TestAgentWarnsUnusedNetworkConfig(t *testing.T) {
	useStub(t)
	cases := map[string]struct {
		server *Server
		extra  string
	}{
		"embedded": {server: &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\nconfigurator: none\nipAddresses:\n    ip1: 192.168.122.10\nconfig:\n    interfaces: []\n")}},
		"explicit": {
			server: &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(strings.Replace(seedPRNetwork, `{"ipAddresses"`, `{"configurator":"none","ipAddresses"`, 1))},
			extra:  "    network-config: explicit\n",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			url, _ := c.server.Start(t, false, "tok")
			m := node.New(t, "52:54:00:0c:00:03", url, c.extra)
			var log node.Log
			res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second})
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			warned := false
			for _, line := range strings.Split(log.String(), "\n") {
				warned = warned || (strings.Contains(line, "level=warning") && strings.Contains(line, "not applied"))
			}
			if !warned || res.Applied {
				t.Errorf("applied %v, no warning about the unused config:\n%s", res.Applied, log.String())
			}
			if calls, _ := os.ReadFile(m.StubDir + "/calls.jsonl"); strings.Contains(string(calls), "192.168.122.10") {
				t.Errorf("an unused config reached nmstatectl:\n%s", calls)
			}
		})
	}
}
