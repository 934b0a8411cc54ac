package hostile

import (
	"strings"
	"testing"

	"github.com/nodereg/nodereg/netpolicy"
)

// TestPolicyRefusesInvalidUTF8: byte sequences that are not UTF-8, sent as
// YAML !!binary (yaml.Marshal makes one of a Go string that is not UTF-8),
// in an nmstate name, an nmstate key, a keyfile's interface-name and a
// section name: refused with exit 78 by the names rule, naming the key
// path, before anything is generated (docs/reliability.md).
func TestPolicyRefusesInvalidUTF8(t *testing.T) {
	bad := eth0(nil)
	bad["name"] = "eth0\xff"
	badKey := eth0(map[string]any{"description\xc3": "x"})
	refuseEach(t, []policyAttack{
		{name: "nmstate interface name", configurator: "nmstate", config: map[string]any{"interfaces": []any{bad}},
			path: "config.interfaces[0].name", rule: netpolicy.Names},
		{name: "nmstate key", configurator: "nmstate", config: map[string]any{"interfaces": []any{badKey}},
			path: `config.interfaces[0]."description\xc3"`, rule: netpolicy.Names},
		{name: "keyfile interface-name", configurator: "nmconnections",
			config: map[string]any{"eth0": strings.Replace(kfHead, "interface-name=eth0", "interface-name=eth0\xff", 1)},
			path:   "config.eth0.nmconnection [connection] interface-name", rule: netpolicy.Names},
		{name: "keyfile section", configurator: "nmconnections",
			config: map[string]any{"eth0": kfHead + "\n[ipv6\xfe]\nmethod=disabled\n"},
			path:   `config.eth0.nmconnection ["ipv6\xfe"]`, rule: netpolicy.Names},
	}, "", "52:54:00:29:04:01", "    nmstate: builtin\n")
}
