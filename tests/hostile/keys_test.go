package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/netpolicy"
)

// keyAttacks are keys of allowed sections that change what the node is on
// the network rather than configure an interface (docs/reliability.md,
// "Network-config policy", the per-key allowlist).
var keyAttacks = []policyAttack{
	{name: "ipv4 shared", config: map[string]any{"eth0": strings.Replace(kfHead, "method=manual", "method=shared", 1)},
		path: "config.eth0.nmconnection [ipv4] method", rule: netpolicy.Shared},
	{name: "ipv6 shared", config: map[string]any{"eth0": kfHead + "\n[ipv6]\nmethod=shared\n"},
		path: "config.eth0.nmconnection [ipv6] method", rule: netpolicy.Shared},
	{name: "unknown method", config: map[string]any{"eth0": kfHead + "\n[ipv6]\nmethod=ignore-me\n"},
		path: "config.eth0.nmconnection [ipv6] method", rule: netpolicy.Unknown},
	{name: "firewall zone", config: map[string]any{"eth0": strings.Replace(kfHead, "type=ethernet", "type=ethernet\nzone=trusted", 1)},
		path: "config.eth0.nmconnection [connection] zone", rule: netpolicy.Zone},
	{name: "match every NIC", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=*\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.MatchWildcard},
	{name: "match all but one", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=eth1;~!lo\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.MatchWildcard},
	{name: "high autoconnect-priority", config: map[string]any{"eth0": strings.Replace(kfHead, "type=ethernet", "type=ethernet\nautoconnect-priority=100", 1)},
		path: "config.eth0.nmconnection [connection] autoconnect-priority", rule: netpolicy.Bounds},
	// docs/reliability.md: GLib refuses these escapes, NetworkManager drops the
	// [match] value, and the profile binds every NIC.
	{name: "match escape NetworkManager drops", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=eth\\x2a\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.Names},
	{name: "match escaped bang", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=eth0\\!\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.Names},
	{name: "match list", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=eth0;eth1\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.MatchWildcard},
	{name: "match empty", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1) + "\n[match]\ninterface-name=\n"},
		path: "config.eth0.nmconnection [match] interface-name", rule: netpolicy.MatchWildcard},
	{name: "names no device", config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0\n", "", 1)},
		path: "config.eth0.nmconnection [connection] interface-name", rule: netpolicy.AnyDevice},
}

// TestPolicyPerKeyAllowlist: each is refused with exit 78, nothing written.
func TestPolicyPerKeyAllowlist(t *testing.T) {
	refuseEach(t, keyAttacks, "nmconnections", "52:54:00:29:05:01", "")
}

// TestPolicyPerKeyOptIn: the node's own config lifts each opt-in rule on
// its own; lifting one does not lift another.
func TestPolicyPerKeyOptIn(t *testing.T) {
	for _, c := range []struct {
		attack int
		allow  netpolicy.Rule
	}{{0, netpolicy.Shared}, {3, netpolicy.Zone}, {4, netpolicy.MatchWildcard}, {11, netpolicy.AnyDevice}} {
		a := keyAttacks[c.attack]
		t.Run(string(c.allow), func(t *testing.T) {
			t.Parallel()
			a.configurator = "nmconnections"
			url := policyServer(t, a)
			o := agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second, PersistOnly: true}
			m := node.New(t, "52:54:00:29:05:02", url, "    network-policy:\n      allow: ["+string(c.allow)+"]\n")
			var log node.Log
			if _, err := runAgent(t.Context(), m, &log, o); err != nil {
				t.Fatalf("allowed %s, refused: %v\n%s", c.allow, err, log.String())
			}
			if _, err := os.Stat(filepath.Join(m.Root, "oem/elemental-network.yaml")); err != nil {
				t.Errorf("the allowed keyfile is not persisted: %v", err)
			}
			other := netpolicy.Shared
			if c.allow == netpolicy.Shared {
				other = netpolicy.Zone
			}
			m = node.New(t, "52:54:00:29:05:03", url, "    network-policy:\n      allow: ["+string(other)+"]\n")
			refusedUnchanged(t, m, a, agent.Options{})
		})
	}
}
