package hostile

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

// supportedStates holds one nmstate state for each interface kind and
// section docs/nmstate.md lists as supported (the states are those of
// nmstate's own vectors, which gc accepts), and the keyfile text each must
// produce (several, separated by |).
var supportedStates = map[string]struct{ state, want string }{
	"ethernet": {`interfaces:
- {name: enp7s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: true}}`, "interface-name=enp7s0"},
	"bond": {`interfaces:
- {name: bond4, type: bond, state: up, link-aggregation: {mode: 802.3ad, port: [ens3f0, ens3f1]}, ipv4: {enabled: true, dhcp: true}}`, "type=bond"},
	"linux-bridge": {`interfaces:
- {name: br5, type: linux-bridge, state: up, bridge: {port: [{name: enp10s0, vlan: {mode: trunk, trunk-tags: [{id: 101}]}}]}, ipv4: {enabled: true, dhcp: true}}
- {name: enp10s0, type: ethernet, state: up}`, "vlans=101"},
	"vlan": {`interfaces:
- {name: ens9, type: ethernet, state: up}
- {name: ens9.77, type: vlan, state: up, vlan: {base-iface: ens9, id: 77}, ipv4: {enabled: true, dhcp: true}}`, "type=vlan"},
	"dummy": {`interfaces:
- {name: dummy5, type: dummy, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: 198.51.100.161, prefix-length: 32}]}}`, "type=dummy"},
	"loopback": {`interfaces:
- {name: lo, type: loopback, state: up, ipv4: {enabled: true, address: [{ip: 127.0.0.1, prefix-length: 8}, {ip: 198.51.100.162, prefix-length: 32}]}, ipv6: {enabled: true, address: [{ip: "::1", prefix-length: 128}]}}`, "type=loopback"},
	"vrf": {`interfaces:
- {name: vrf-blue, type: vrf, state: up, vrf: {route-table-id: 1001, port: [enp12s0]}}
- {name: enp12s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: 203.0.113.98, prefix-length: 28}]}}`, "[vrf]"},
	"vxlan": {`interfaces:
- {name: enp12s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: 203.0.113.98, prefix-length: 28}]}}
- {name: vxlan42, type: vxlan, state: up, vxlan: {id: 42, base-iface: enp12s0, remote: 203.0.113.99, destination-port: 4789}}`, "[vxlan]"},
	"veth": {`interfaces:
- {name: veth-a1, type: veth, state: up, veth: {peer: veth-b1}, ipv4: {enabled: true, dhcp: false, address: [{ip: 198.51.100.177, prefix-length: 30}]}}`, "peer=veth-b1"},
	"infiniband": {`interfaces:
- {name: ib1.8001, type: infiniband, state: up, infiniband: {base-iface: ib1, mode: datagram, pkey: "0x8001"}, ipv4: {enabled: true, dhcp: true}}`, "[infiniband]"},
	"[sriov]": {`interfaces:
- {name: enp11s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: true}, ethernet: {sr-iov: {total-vfs: 4}}}`, "[sriov]"},
	"typed routes": {`interfaces:
- {name: enp9s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: 203.0.113.34, prefix-length: 27}]}}
routes:
  config:
  - {destination: 198.51.100.192/28, route-type: blackhole}
  - {destination: 198.51.100.208/28, route-type: unreachable}
  - {destination: 198.51.100.224/28, route-type: prohibit}`, "id=lo|type=loopback|type=blackhole|type=unreachable|type=prohibit"},
	"route rules": {`interfaces:
- {name: enp9s0, type: ethernet, state: up, ipv4: {enabled: true, dhcp: false, address: [{ip: 203.0.113.34, prefix-length: 27}]}}
route-rules:
  config:
  - {ip-to: 198.51.100.192/28, priority: 3030, action: blackhole}
  - {ip-from: 203.0.113.32/27, priority: 3031, route-table: 254}`, "routing-rule0="},
}

// documentedKinds reads the nmstate interface kinds docs/nmstate.md lists
// as supported (the `interfaces[].type` row of "Supported subset").
func documentedKinds(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/nmstate.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `interfaces[].type`:"); ok {
			cell, _, _ := strings.Cut(rest, "|")
			// "(only `lo`)" qualifies a kind, it is not one.
			cell = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(cell, "")
			var kinds []string
			for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(cell, -1) {
				kinds = append(kinds, m[1])
			}
			return kinds
		}
	}
	t.Fatal("docs/nmstate.md has no `interfaces[].type` row")
	return nil
}

// TestDefaultPolicyAcceptsSupported renders, under the default network
// policy (a node that opts in to nothing), one state for every interface
// kind and section docs/nmstate.md lists as supported, typed routes and
// route rules included, with the built-in translator: each is accepted
// and written. The policy refuses what a server has no business setting,
// not what the agent supports.
func TestDefaultPolicyAcceptsSupported(t *testing.T) {
	kinds := documentedKinds(t)
	if len(kinds) < 5 {
		t.Fatalf("read %v from docs/nmstate.md: too few kinds", kinds)
	}
	for _, k := range kinds {
		if _, ok := supportedStates[k]; !ok {
			t.Errorf("docs/nmstate.md lists kind %q and this test has no state for it", k)
		}
	}
	for name, c := range supportedStates {
		if !strings.HasPrefix(name, "[") && !strings.Contains(name, " ") && !slices.Contains(kinds, name) {
			t.Errorf("kind %q is not listed in docs/nmstate.md", name)
		}
		t.Run(name, func(t *testing.T) {
			var state yaml.Node
			if err := yaml.Unmarshal([]byte(c.state), &state); err != nil {
				t.Fatal(err)
			}
			nc := &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNmstate, Config: map[string]protocol.RawValue{}}
			var top map[string]yaml.Node
			if err := state.Decode(&top); err != nil {
				t.Fatal(err)
			}
			for k, v := range top {
				var val any
				if err := v.Decode(&val); err != nil {
					t.Fatal(err)
				}
				nc.Config[k] = protocol.RawValue{Value: val}
			}
			var out bytes.Buffer
			if err := agent.PrintRender(context.Background(), &out, nc, apply.NmstateBuiltin); err != nil {
				t.Fatalf("refused under the default policy: %v", err)
			}
			for _, w := range strings.Split(c.want, "|") {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the rendered keyfiles lack %q:\n%s", w, out.String())
				}
			}
		})
	}
}
