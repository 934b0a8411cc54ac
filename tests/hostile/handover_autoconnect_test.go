package hostile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/netpolicy"
)

// handOverNode is a node whose toolkit is the elemental stand-in, which
// records its calls in the file returned.
func handOverNode(t *testing.T, mac, url, local string) (*node.Machine, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "elemental.jsonl")
	t.Setenv("NODEREG_ELEMENTAL", testbin.Build(t, "./tests/stubs/elemental"))
	t.Setenv("ELEMENTAL_STUB_LOG", log)
	m := node.New(t, mac, url, local)
	t.Setenv("ELEMENTAL_STUB_ROOT", m.Root)
	return m, log
}

// TestHandOverRefusesNoAutoconnect: --reset and --install have no
// reachability check before the boot that brings the config up, so a
// profile that boot would not autoconnect (a keyfile's autoconnect=false,
// nmstate's `state: down` through the built-in translator) is refused at
// plan: exit 78, the rule named, nothing written, the toolkit never called
// (docs/apply.md, "The rollback check tests the next boot").
func TestHandOverRefusesNoAutoconnect(t *testing.T) {
	attacks := []policyAttack{
		{name: "keyfile-autoconnect-false", configurator: "nmconnections",
			config: map[string]any{"eth0": strings.Replace(kfHead, "type=ethernet", "type=ethernet\nautoconnect=false", 1)},
			path:   "config.eth0.nmconnection [connection] autoconnect", rule: netpolicy.HandOverAutoconnect},
		{name: "nmstate-state-down", configurator: "nmstate",
			config: map[string]any{"interfaces": []any{eth0(map[string]any{"state": "down"})}},
			path:   "builtin output eth0.nmconnection [connection] autoconnect", rule: netpolicy.HandOverAutoconnect},
	}
	for _, mode := range []agent.Mode{agent.ModeReset, agent.ModeInstall} {
		for _, a := range attacks {
			t.Run(map[agent.Mode]string{agent.ModeReset: "reset", agent.ModeInstall: "install"}[mode]+"/"+a.name, func(t *testing.T) {
				m, log := handOverNode(t, "52:54:00:1d:00:01", policyServer(t, a), "    nmstate: builtin\n")
				refusedUnchanged(t, m, a, agent.Options{Mode: mode})
				if b, err := os.ReadFile(log); err == nil {
					t.Errorf("elemental was called:\n%s", b)
				}
			})
		}
	}
}

// TestHandOverPassesAutoconnecting: an ordinary profile (no autoconnect
// key, NetworkManager's default on) still hands over: exit 0, and the
// toolkit's hook carries the keyfile.
func TestHandOverPassesAutoconnecting(t *testing.T) {
	a := policyAttack{configurator: "nmconnections", config: map[string]any{"eth0": kfHead}}
	m, log := handOverNode(t, "52:54:00:1d:00:02", policyServer(t, a), "")
	imageProfile(t, m)
	var out node.Log
	o := agent.Options{Mode: agent.ModeReset, Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second}
	if _, err := runAgent(t.Context(), m, &out, o); err != nil {
		t.Fatalf("an autoconnecting profile was not handed over: %v\n%s", err, out.String())
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("elemental was not called: %v", err)
	}
	var c struct {
		Verb  string            `json:"verb"`
		Hooks map[string]string `json:"hooks"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Verb != "reset" {
		t.Fatalf("elemental call %s: %v", b, err)
	}
	var carried bool
	for _, h := range c.Hooks {
		carried = carried || strings.Contains(h, "interface-name=eth0")
	}
	if !carried {
		t.Errorf("no hook carries the eth0 keyfile: %v", c.Hooks)
	}
}
