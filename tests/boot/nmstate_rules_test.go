//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The built-in translator's MAC-identified profiles and route rules on a
// real NetworkManager: the profile names no interface, only the NIC's MAC,
// so NetworkManager must find the device by its address; the rule sends the
// pool subnet's traffic to a table of its own (docs/nmstate.md).

const (
	macProfile = "lab-uplink" // profile-name: the keyfile's id, not the NIC's name
	ruleTable  = "100"
	rulePrio   = "3000"
	ruleFrom   = "10.231.0.0/24"
)

// nmstateMACRuleTemplate identifies the NIC by the machine's MAC (filled in
// by the test) and adds a policy rule with a default route in its table.
const nmstateMACRuleTemplate = `
    configurator: nmstate
    ipAddresses:
      inventory-ip: pool-a
    config:
      interfaces:
      - name: ` + nodeIf + `
        profile-name: ` + macProfile + `
        identifier: mac-address
        mac-address: "%s"
        type: ethernet
        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
      routes:
        config:
        - {destination: 0.0.0.0/0, next-hop-interface: ` + nodeIf + `, next-hop-address: ` + serverIP + `, metric: 150}
        - {destination: 0.0.0.0/0, next-hop-interface: ` + nodeIf + `, next-hop-address: ` + serverIP + `, table-id: ` + ruleTable + `}
      route-rules:
        config:
        - {ip-from: ` + ruleFrom + `, priority: ` + rulePrio + `, route-table: ` + ruleTable + `}
`

// ipRule is one `ip -j rule` entry.
type ipRule struct {
	Priority int    `json:"priority"`
	Src      string `json:"src"`
	SrcLen   int    `json:"srclen"`
	Table    string `json:"table"`
}

func (m *nmstateMachine) rules(t *testing.T) []ipRule {
	t.Helper()
	var rs []ipRule
	must(t, json.Unmarshal([]byte(run(t, m.inNode("ip", "-j", "-4", "rule", "show")...)), &rs))
	return rs
}

// checkMACRule: the address is on the NIC whose MAC the profile names,
// that NIC is connected by our profile, the rule is in the kernel and its
// table holds the default route.
func (m *nmstateMachine) checkMACRule(t *testing.T, label, addr string) {
	t.Helper()
	m.check(t, label, netState{dev: nodeIf, addrs: []string{cidr(addr)}, routes: []string{"default via " + serverIP + " metric 150"}})
	mac := strings.TrimSpace(run(t, m.inNode("cat", "/sys/class/net/"+nodeIf+"/address")...))
	if !strings.EqualFold(mac, m.mac) {
		t.Fatalf("%s: %s has MAC %s, want %s (the test set it)", label, nodeIf, mac, m.mac)
	}
	if out, _ := m.nmcliOut("-g", "GENERAL.CONNECTION", "device", "show", nodeIf); strings.TrimSpace(out) != macProfile {
		t.Errorf("%s: %s is connected by %q, want the MAC-identified profile %q", label, nodeIf, strings.TrimSpace(out), macProfile)
	}
	found := false
	for _, r := range m.rules(t) {
		if fmt.Sprintf("%s/%d", r.Src, r.SrcLen) == ruleFrom && fmt.Sprint(r.Priority) == rulePrio && r.Table == ruleTable {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: no rule %s: from %s lookup %s in:\n%s", label, rulePrio, ruleFrom, ruleTable, run(t, m.inNode("ip", "rule", "show")...))
	}
	if out := run(t, m.inNode("ip", "-4", "route", "show", "table", ruleTable)...); !strings.Contains(out, "default via "+serverIP+" dev "+nodeIf) {
		t.Errorf("%s: table %s is %q, want the default route via %s", label, ruleTable, out, serverIP)
	}
}

// TestNmstateMACProfileAndRouteRule: first boot applies the profile live,
// then a reboot and recovery bring it back from /oem.
func TestNmstateMACProfileAndRouteRule(t *testing.T) {
	t.Parallel()
	r := newReport(t, "N3 nmstate MAC profile + route rule")
	m := newNmstateMachine(t, nmstateServerConfig(nmstateSeedTemplate))
	m.startServer(nmstateServerConfig(fmt.Sprintf(nmstateMACRuleTemplate, m.mac)))
	// NetworkManager matches the profile against the device's address: the
	// veth gets the node's MAC (its own is random).
	run(t, m.inNode("ip", "link", "set", nodeIf, "address", m.mac)...)

	start := m.boot(active, true)
	m.register(t, "first boot", 0)
	addr := m.claimed("inventory-ip")
	r.boot("first", m.waitAddrOn(t, start, nodeIf, cidr(addr)))
	m.checkMACRule(t, "first boot", addr)

	kf := m.keyfile(macProfile)
	for _, want := range []string{"id=" + macProfile + "\n", "mac-address=" + strings.ToUpper(m.mac) + "\n",
		"routing-rule0=priority " + rulePrio + " from " + ruleFrom + " table " + ruleTable + "\n"} {
		if !bytes.Contains(kf, []byte(want)) {
			t.Errorf("keyfile %s lacks %q:\n%s", macProfile, strings.TrimSpace(want), kf)
		}
	}
	if bytes.Contains(kf, []byte("interface-name=")) {
		t.Errorf("the MAC-identified keyfile names an interface:\n%s", kf)
	}
	if got := keys(keyfiles(t, m.machine)); !equal(got, []string{macProfile + ".nmconnection"}) {
		t.Errorf("keyfiles %v, want only %s.nmconnection", got, macProfile)
	}

	for _, b := range []struct{ mode, label string }{{active, "reboot"}, {recovery, "recovery"}} {
		start := m.boot(b.mode, false)
		r.boot(b.label, m.waitAddrOn(t, start, nodeIf, cidr(addr)))
		m.checkMACRule(t, b.label+", before the agent", addr)
		if res := m.register(t, b.label, 0); !strings.Contains(res.out, "unchanged since the last run") {
			t.Errorf("%s: the agent did not find the config unchanged", b.label)
		}
	}
}
