package hostile

import (
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/netpolicy"
)

// TestPolicyNmstatectlShapes: with nmstatectl as the generator, interfaces
// given as a mapping and an interface without type are judged, not passed
// over: refused (exit 78) before the tool is called.
func TestPolicyNmstatectlShapes(t *testing.T) {
	useStub(t)
	untyped := eth0(nil)
	delete(untyped, "type")
	for _, a := range []policyAttack{
		{name: "interfaces as a mapping", config: map[string]any{"interfaces": map[string]any{"eth0": eth0(map[string]any{"dispatch": map[string]any{"post-activation": "sh"}})}},
			path: "config.interfaces", rule: netpolicy.Unknown},
		{name: "interface without type", config: map[string]any{"interfaces": []any{untyped}},
			path: "config.interfaces[0].type", rule: netpolicy.Unknown},
	} {
		t.Run(a.name, func(t *testing.T) {
			a.configurator = "nmstate"
			m := node.New(t, "52:54:00:29:07:01", policyServer(t, a), "    nmstate: nmstatectl\n")
			if calls := refusedUnchanged(t, m, a, agent.Options{}); calls != "" {
				t.Errorf("nmstatectl was called for a refused config:\n%s", calls)
			}
		})
	}
}

// TestPercentInInterfaceName: '%' in an interface name, which
// NetworkManager refuses ("'%' is not allowed in interface names", nmcli
// 1.42), is refused in a server keyfile (render names the key; the names
// rule refuses it in a generator's keyfile too: netpolicy's unit tests):
// exit 78, nothing written.
func TestPercentInInterfaceName(t *testing.T) {
	a := policyAttack{name: "percent", configurator: "nmconnections",
		config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0", "interface-name=eth%d", 1)}}
	m := node.New(t, "52:54:00:29:07:02", policyServer(t, a), "")
	before := testutil.Files(t, m.Root)
	var log node.Log
	_, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second})
	if code := agent.ExitCode(err); code != agent.ExitConfig || !strings.Contains(err.Error(), "config.eth0 [connection] interface-name") || !strings.Contains(err.Error(), "'%'") {
		t.Fatalf("exit %d (%v), want 78 naming the key and the '%%'", code, err)
	}
	after := testutil.Files(t, m.Root)
	for p := range after {
		if _, ok := before[p]; !ok && strings.Contains(p, "NetworkManager") {
			t.Errorf("a refused config wrote %s", p)
		}
	}
}
