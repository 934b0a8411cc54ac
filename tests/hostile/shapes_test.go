package hostile

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/netpolicy"
)

// TestPolicyNmstatectlShapes: with nmstatectl as the generator, interfaces
// given as a mapping are judged, not passed over: refused (exit 78) before
// the tool is called. (An interface without type is judged as what will
// be written: TestUntypedInterfaceJudgedAsWritten.)
func TestPolicyNmstatectlShapes(t *testing.T) {
	useStub(t)
	refuseEach(t, []policyAttack{
		{name: "interfaces as a mapping", config: map[string]any{"interfaces": map[string]any{"eth0": eth0(map[string]any{"dispatch": map[string]any{"post-activation": "sh"}})}},
			path: "config.interfaces", rule: netpolicy.Unknown},
	}, "nmstate", "52:54:00:29:07:01", "    nmstate: nmstatectl\n")
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
	if code := exitcode.Of(err); code != exitcode.Config || !strings.Contains(err.Error(), "config.eth0 [connection] interface-name") || !strings.Contains(err.Error(), "'%'") {
		t.Fatalf("exit %d (%v), want 78 naming the key and the '%%'", code, err)
	}
	after := testutil.Files(t, m.Root)
	for p := range after {
		if _, ok := before[p]; !ok && strings.Contains(p, "NetworkManager") {
			t.Errorf("a refused config wrote %s", p)
		}
	}
}

// TestUntypedInterfaceJudgedAsWritten (docs/nmstate.md, untyped interfaces): an operator's
// multi-NIC state whose second NIC, on DHCP, is listed without a type, as
// it passed a round ago, goes through both configurators: the built-in
// translator and nmstatectl gc (the stand-in, replaying gc) each write it
// as the ethernet profile gc writes for an interface of unknown type
// (transcript 05: "Setting unknown type interface eth0 to ethernet"), the
// policy judges that, and the state kept for `nmstatectl apply` names the
// kind, so the live apply cannot take another from the node's interface.
func TestUntypedInterfaceJudgedAsWritten(t *testing.T) {
	dhcp := map[string]any{"name": "eth1", "state": "up", "ipv4": map[string]any{"enabled": true, "dhcp": true}, "ipv6": map[string]any{"enabled": false}}
	config := map[string]any{"interfaces": []any{eth0(nil), dhcp},
		"routes": map[string]any{"config": []any{map[string]any{"destination": "0.0.0.0/0", "next-hop-interface": "eth0", "next-hop-address": "192.168.122.1"}}}}
	for _, generator := range []string{"builtin", "nmstatectl"} {
		t.Run(generator, func(t *testing.T) {
			local := ""
			if generator == "nmstatectl" {
				useStub(t)
				local = "    nmstate: nmstatectl\n"
			}
			a := policyAttack{name: "untyped", configurator: "nmstate", config: config}
			m := node.New(t, "52:54:00:37:08:01", policyServer(t, a), local)
			var log node.Log
			o := agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second, PersistOnly: true}
			if _, err := runAgent(t.Context(), m, &log, o); err != nil {
				t.Fatalf("%s: the untyped DHCP NIC was refused: %v\n%s", generator, err, log.String())
			}
			yip, err := os.ReadFile(filepath.Join(m.Root, "oem/elemental-network.yaml"))
			testutil.Must(t, err)
			var eth1 string
			for _, part := range strings.Split(string(yip), "[connection]") {
				if strings.Contains(part, "interface-name=eth1\n") {
					eth1 = part
				}
			}
			if !strings.Contains(eth1, "type=802-3-ethernet\n") || !strings.Contains(eth1, "method=auto\n") {
				t.Errorf("%s: eth1 is not written as gc's ethernet DHCP profile:\n%s", generator, yip)
			}
			if calls, _ := os.ReadFile(m.StubDir + "/calls.jsonl"); generator == "nmstatectl" && !strings.Contains(string(calls), `"gc"`) {
				t.Errorf("nmstatectl gc was not the generator:\n%s", calls)
			}
			digested, err := os.ReadFile(filepath.Join(m.Root, "oem/nodereg/network-config.nmstate"))
			if err != nil || !regexp.MustCompile(`(?s)name: eth1\n.*type: ethernet|type: ethernet\n[^-]*name: eth1`).Match(digested) {
				t.Errorf("%s: the state kept for nmstatectl apply does not name eth1's kind: %v\n%s", generator, err, digested)
			}
		})
	}
}
