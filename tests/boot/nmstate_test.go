//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// The nmstate cases: the configurator of the IPAM design, on a node without
// nmstatectl, so the agent's built-in translator writes the keyfiles and
// applies them the keyfile way. What the template asks for (addresses,
// routes with their metric, DNS) is read back from the kernel and from
// NetworkManager.

// nmstateSeedTemplate is the IPAM design's seed template (docs/protocol.md
// §7.1) on the lab's NIC and subnet: the pool address, a default
// route via the server with metric 150, the server as DNS.
var nmstateSeedTemplate = strings.NewReplacer("enp1s0", nodeIf, "192.168.122.1", serverIP).Replace(node.NmstateTemplate)

// The VLAN the nmstate VLAN template puts the node on; the server's end
// carries vlanServerIP, so the registration URL stays reachable over it.
const (
	vlanID       = "10"
	vlanIf       = nodeIf + "." + vlanID
	vlanServerIf = serverIf + "." + vlanID
	vlanServerIP = "10.233.0.1"
)

// nmstateVLANTemplate moves the node's address onto VLAN 10 over its NIC
// (the NIC itself keeps no address), with a default route and a second
// route via the server's VLAN address, and DNS on the VLAN.
const nmstateVLANTemplate = `
    configurator: nmstate
    ipAddresses:
      vlan-ip: pool-v
    config:
      interfaces:
      - name: ` + nodeIf + `
        type: ethernet
        state: up
        ipv4: {enabled: false}
        ipv6: {enabled: false}
      - name: ` + vlanIf + `
        type: vlan
        state: up
        vlan: {base-iface: ` + nodeIf + `, id: ` + vlanID + `}
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{vlan-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
      routes:
        config:
        - {destination: 0.0.0.0/0, next-hop-interface: ` + vlanIf + `, next-hop-address: ` + vlanServerIP + `, metric: 150}
        - {destination: 10.232.7.0/24, next-hop-interface: ` + vlanIf + `, next-hop-address: ` + vlanServerIP + `, metric: 90}
      dns-resolver:
        config: {server: [` + vlanServerIP + `], search: [lab.example]}
`

// The bridge the nmstate bridge template puts the node's address on, with
// the NIC as its port: a controller and a port, as a bond has.
const bridgeIf = "nrbr0"

// nmstateBridgeTemplate moves the node's address onto a bridge whose port
// is the NIC (which keeps no address of its own), with a default route and
// a second route via the server, and DNS on the bridge.
const nmstateBridgeTemplate = `
    configurator: nmstate
    ipAddresses:
      bridge-ip: pool-a
    config:
      interfaces:
      - name: ` + bridgeIf + `
        type: linux-bridge
        state: up
        bridge:
          options: {stp: {enabled: false}}
          port: [{name: ` + nodeIf + `}]
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{bridge-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
      - name: ` + nodeIf + `
        type: ethernet
        state: up
      routes:
        config:
        - {destination: 0.0.0.0/0, next-hop-interface: ` + bridgeIf + `, next-hop-address: ` + serverIP + `, metric: 150}
        - {destination: 10.232.7.0/24, next-hop-interface: ` + bridgeIf + `, next-hop-address: ` + serverIP + `, metric: 90}
      dns-resolver:
        config: {server: [` + serverIP + `], search: [lab.example]}
`

// nmstateCutOffTemplate puts the NIC on pool-b, from which the server
// cannot be reached.
const nmstateCutOffTemplate = `
    configurator: nmstate
    ipAddresses:
      cut-ip: pool-b
    config:
      interfaces:
      - name: ` + nodeIf + `
        type: ethernet
        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{cut-ip}", prefix-length: 24}]}
        ipv6: {enabled: false}
`

// nmstateServerConfig is serverConfig with pool-v, the VLAN's subnet.
func nmstateServerConfig(network string) string {
	return serverConfig(network) + `- name: pool-v
  addresses: [10.233.0.100-10.233.0.120]
  prefix: 24
  gateway: ` + vlanServerIP + `
`
}

// nmstateMachine is a machine whose agent runs without nmstatectl.
type nmstateMachine struct {
	*machine
	env []string // the agent's PATH, without nmstatectl
}

func newNmstateMachine(t *testing.T, cfg string) *nmstateMachine {
	t.Helper()
	m := &nmstateMachine{machine: newMachine(t, cfg)}
	// The agent's PATH is the host's minus any directory holding an
	// nmstatectl; asserted below in the node, with the agent's own env.
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "nmstatectl")); err != nil {
			dirs = append(dirs, d)
		}
	}
	m.env = []string{"PATH=" + strings.Join(dirs, ":"), "NODEREG_NMSTATECTL="}
	argv := m.inNode(append(append([]string{"env", m.busEnv}, m.env...), "sh", "-c", "command -v nmstatectl")...)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err == nil {
		t.Fatalf("nmstatectl is on the agent's PATH (%s): the nmstate cases need a node without it", bytes.TrimSpace(out))
	}
	return m
}

// addServerVLAN gives the server its end of VLAN 10, or skips when the
// kernel has no VLAN support (no 8021q: "Unknown device type").
func (m *nmstateMachine) addServerVLAN(t *testing.T) {
	t.Helper()
	out, err := exec.Command("ip", "-n", m.srvNS, "link", "add", "link", serverIf, "name", vlanServerIf, "type", "vlan", "id", vlanID).CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("Unknown device type")) {
		t.Skipf("this kernel cannot create VLAN interfaces (module 8021q): %s", bytes.TrimSpace(out))
	}
	if err != nil {
		t.Fatalf("adding the server's VLAN: %v %s", err, out)
	}
	run(t, labkit.InNS(m.srvNS, "ip", "addr", "add", vlanServerIP+"/24", "dev", vlanServerIf)...)
	run(t, labkit.InNS(m.srvNS, "ip", "link", "set", vlanServerIf, "up")...)
}

// register runs the agent and checks it said the built-in made the keyfiles
// whenever it planned.
func (m *nmstateMachine) register(t *testing.T, label string, wantCode int) agentRun {
	t.Helper()
	res := m.runAgent(m.env)
	if res.code != wantCode {
		t.Fatalf("%s: agent exit %d, want %d", label, res.code, wantCode)
	}
	if !strings.Contains(res.out, "unchanged since the last run") && !strings.Contains(res.out, "keyfiles by the built-in nmstate translator") {
		t.Errorf("%s: the agent did not say the built-in translator wrote the keyfiles", label)
	}
	if strings.Contains(res.out, "nmstatectl apply") || strings.Contains(res.out, "keyfiles by nmstatectl") {
		t.Errorf("%s: the agent went the nmstatectl way", label)
	}
	return res
}

// addrsOf lists dev's IPv4 addresses as address/prefix (none if dev does
// not exist).
func (m *nmstateMachine) addrsOf(t *testing.T, dev string) []string {
	t.Helper()
	out, err := exec.Command("ip", "-n", m.nodeNS, "-j", "-4", "addr", "show", "dev", dev).Output()
	if err != nil {
		return nil
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	must(t, json.Unmarshal(out, &links))
	var a []string
	for _, l := range links {
		for _, ai := range l.AddrInfo {
			a = append(a, fmt.Sprintf("%s/%d", ai.Local, ai.PrefixLen))
		}
	}
	return a
}

// routesOf lists the main table's IPv4 routes through dev as
// "dst via gw metric n".
func (m *nmstateMachine) routesOf(t *testing.T, dev string) []string {
	t.Helper()
	out := run(t, m.inNode("ip", "-j", "-4", "route", "show", "table", "main", "dev", dev)...)
	var rs []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
		Metric  int    `json:"metric"`
	}
	must(t, json.Unmarshal([]byte(out), &rs))
	var r []string
	for _, e := range rs {
		if e.Gateway != "" {
			r = append(r, fmt.Sprintf("%s via %s metric %d", e.Dst, e.Gateway, e.Metric))
		}
	}
	return r
}

// dnsOf is what NetworkManager configured as dev's IPv4 DNS servers and
// search domains (it runs with dns=none, so /etc/resolv.conf is not it).
func (m *nmstateMachine) dnsOf(t *testing.T, dev string) (servers, search string) {
	t.Helper()
	out, err := m.nmcliOut("-g", "IP4.DNS,IP4.SEARCHES", "device", "show", dev)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for len(lines) < 2 {
		lines = append(lines, "")
	}
	return lines[0], lines[1]
}

// waitAddrOn waits until dev carries want.
func (m *nmstateMachine) waitAddrOn(t *testing.T, start time.Time, dev, want string) time.Duration {
	t.Helper()
	waitFor(t, "address "+want+" on "+dev, func() bool { return slices.Contains(m.addrsOf(t, dev), want) }, m.diag)
	return time.Since(start)
}

// netState is what one config should put on the node.
type netState struct {
	dev    string   // the interface with the address
	addrs  []string // its addresses, exactly
	routes []string // among its routes
	dns    string   // its DNS servers, as nmcli -g prints them
	search string
	bare   []string // interfaces that must carry no IPv4 address
}

func (m *nmstateMachine) check(t *testing.T, label string, s netState) {
	t.Helper()
	if got := m.addrsOf(t, s.dev); !equal(got, s.addrs) {
		t.Errorf("%s: %s has %v, want %v", label, s.dev, got, s.addrs)
	}
	got := m.routesOf(t, s.dev)
	for _, r := range s.routes {
		if !slices.Contains(got, r) {
			t.Errorf("%s: routes via %s are %v, want %q among them", label, s.dev, got, r)
		}
	}
	// NetworkManager sets addresses before the device is activated and
	// publishes DNS at activation: a readiness wait, not a speed check.
	waitFor(t, s.dev+" activated", func() bool {
		out, err := m.nmcliOut("-g", "GENERAL.STATE", "device", "show", s.dev)
		return err == nil && strings.HasPrefix(out, "100")
	}, func() string { out, _ := m.nmcliOut("device", "show", s.dev); return out + m.diag() })
	// The keyfile's profile, not one NetworkManager made up for an
	// address it found on the device.
	if out, _ := m.nmcliOut("-g", "GENERAL.STATE", "device", "show", s.dev); strings.Contains(out, "externally") {
		t.Errorf("%s: %s is %s", label, s.dev, strings.TrimSpace(out))
	}
	if dns, search := m.dnsOf(t, s.dev); dns != s.dns || search != s.search {
		out, _ := m.nmcliOut("device", "show", s.dev)
		t.Errorf("%s: DNS of %s is %q search %q, want %q search %q\n%s", label, s.dev, dns, search, s.dns, s.search, out)
	}
	for _, d := range s.bare {
		if got := m.addrsOf(t, d); len(got) != 0 {
			t.Errorf("%s: %s still has %v", label, d, got)
		}
	}
}

// seedState is what the seed template asks for with address addr.
func seedState(addr string) netState {
	return netState{dev: nodeIf, addrs: []string{cidr(addr)}, routes: []string{"default via " + serverIP + " metric 150"}, dns: serverIP}
}

// nmstateFirstBoot is case 1 with the seed template: bootstrap address,
// agent, pool address, route and DNS of the template.
func nmstateFirstBoot(t *testing.T, m *nmstateMachine, r *report) string {
	t.Helper()
	start := m.boot(active, true)
	m.register(t, "first boot", 0)
	addr := m.claimed("inventory-ip")
	r.boot("first", m.waitAddrOn(t, start, nodeIf, cidr(addr)))
	m.check(t, "first boot", seedState(addr))
	kf := m.keyfile(nodeIf)
	for _, want := range []string{"address0=" + cidr(addr) + "\n", "route0=0.0.0.0/0," + serverIP + ",150\n", "dns=" + serverIP + "\n"} {
		if !bytes.Contains(kf, []byte(want)) {
			t.Errorf("first boot: keyfile lacks %q:\n%s", strings.TrimSpace(want), kf)
		}
	}
	if !bytes.Contains(m.read(applicator), []byte("address0="+cidr(addr))) {
		t.Errorf("first boot: the applicator under /oem lacks the pool address")
	}
	return addr
}

// nmstateReboot reboots into mode: the applicator under /oem brings the
// config up before the agent runs, and the agent finds it unchanged.
func nmstateReboot(t *testing.T, m *nmstateMachine, r *report, mode, label string, want netState) {
	t.Helper()
	kfBefore, appBefore := keyfiles(t, m.machine), m.read(applicator)
	start := m.boot(mode, false)
	r.boot(label, m.waitAddrOn(t, start, want.dev, want.addrs[0]))
	m.check(t, label+", before the agent", want)
	if got := keyfiles(t, m.machine); !equalMaps(got, kfBefore) {
		t.Errorf("%s: the initramfs stage recreated %v, want %v", label, keys(got), keys(kfBefore))
	}
	res := m.register(t, label, 0)
	if !strings.Contains(res.out, "unchanged since the last run") {
		t.Errorf("%s: the agent did not find the config unchanged", label)
	}
	if !bytes.Equal(m.read(applicator), appBefore) || !equalMaps(keyfiles(t, m.machine), kfBefore) {
		t.Errorf("%s: the agent rewrote the applicator or the keyfiles", label)
	}
	m.check(t, label+", after the agent", want)
}

// nmstateCutOff serves the cut-off template: the live apply fails the
// reachability check and is rolled back (exit 75) to want, with keyfiles,
// applicator, manifest and state unchanged; the next boot brings want up.
func nmstateCutOff(t *testing.T, m *nmstateMachine, r *report, want netState) {
	t.Helper()
	kfBefore := keyfiles(t, m.machine)
	oldApplicator, oldManifest, oldState := m.read(applicator), m.read(manifest), m.read(stateFile)
	m.startServer(nmstateServerConfig(nmstateCutOffTemplate))
	start := m.boot(active, false)
	r.boot("before cut-off", m.waitAddrOn(t, start, want.dev, want.addrs[0]))
	res := m.register(t, "cut-off template", 75)
	if !strings.Contains(res.out, "reachability check") {
		t.Errorf("the agent's failure does not name the reachability check")
	}
	if cut := m.claimed("cut-ip"); !strings.HasPrefix(cut, "10.240.0.") {
		t.Errorf("regserver gave the cut-off claim %q, want a pool-b address", cut)
	}
	m.check(t, "after the rollback", want)
	if got := keyfiles(t, m.machine); !equalMaps(got, kfBefore) {
		t.Errorf("keyfiles after the rollback: %v, want %v as before", keys(got), keys(kfBefore))
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{applicator, oldApplicator}, {manifest, oldManifest}, {stateFile, withoutNetworkError(oldState)}} {
		got := m.read(f.path)
		if f.path == stateFile {
			got = withoutNetworkError(got) // it gains the kept error (docs/annotations.md)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s changed by a rolled-back apply", f.path)
		}
	}
	start = m.boot(active, false)
	r.boot("after rollback", m.waitAddrOn(t, start, want.dev, want.addrs[0]))
	m.check(t, "boot after the rollback", want)
}

// The seed's ethernet template without nmstatectl: first boot, reboot,
// recovery, and a cut-off template rolled back.
func TestNmstateSeedTemplate(t *testing.T) {
	t.Parallel()
	r := newReport(t, "N1 nmstate seed, no nmstatectl: boot/rollback")
	m := newNmstateMachine(t, nmstateServerConfig(nmstateSeedTemplate))
	addr := nmstateFirstBoot(t, m, r)
	nmstateReboot(t, m, r, active, "reboot", seedState(addr))
	nmstateReboot(t, m, r, recovery, "recovery", seedState(addr))
	nmstateCutOff(t, m, r, seedState(addr))
}

// A template change from the seed to a controller template without
// nmstatectl (a linux-bridge with the NIC as its port; a VLAN over the NIC
// where the kernel has 8021q): applied once (the NIC's own address goes,
// the new interface carries the new one with its routes and DNS), brought
// back from /oem at reboot and in recovery, and a cut-off template rolled
// back to it.
func TestNmstateTemplateChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, template, claim, pool string
		state                       func(addr string) netState
		keyfiles                    []string
		kfWants                     map[string][]string
	}{{
		name: "bridge", template: nmstateBridgeTemplate, claim: "bridge-ip", pool: "10.231.0.",
		state: func(addr string) netState {
			return netState{dev: bridgeIf, addrs: []string{cidr(addr)},
				routes: []string{"default via " + serverIP + " metric 150", "10.232.7.0/24 via " + serverIP + " metric 90"},
				dns:    serverIP, search: "lab.example", bare: []string{nodeIf}}
		},
		keyfiles: []string{bridgeIf + ".nmconnection", nodeIf + ".nmconnection"},
		kfWants: map[string][]string{bridgeIf: {"\n[bridge]\n", "type=bridge\n"},
			nodeIf: {"master=" + bridgeIf + "\n", "slave-type=bridge\n"}},
	}, {
		name: "vlan", template: nmstateVLANTemplate, claim: "vlan-ip", pool: "10.233.0.",
		state: func(addr string) netState {
			return netState{dev: vlanIf, addrs: []string{cidr(addr)},
				routes: []string{"default via " + vlanServerIP + " metric 150", "10.232.7.0/24 via " + vlanServerIP + " metric 90"},
				dns:    vlanServerIP, search: "lab.example", bare: []string{nodeIf}}
		},
		keyfiles: []string{vlanIf + ".nmconnection", nodeIf + ".nmconnection"},
		kfWants:  map[string][]string{vlanIf: {"\n[vlan]\n", "parent=" + nodeIf + "\n"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newReport(t, "N2 nmstate seed→"+tc.name+", no nmstatectl")
			m := newNmstateMachine(t, nmstateServerConfig(nmstateSeedTemplate))
			if tc.name == "vlan" {
				m.addServerVLAN(t)
			}
			addr := nmstateFirstBoot(t, m, r)
			m.startServer(nmstateServerConfig(tc.template))

			start := m.boot(active, false)
			r.boot("old config", m.waitAddrOn(t, start, nodeIf, cidr(addr)))
			res := m.register(t, "changed template", 0)
			if strings.Contains(res.out, "unchanged since the last run") {
				t.Fatal("changed template: the agent found the config unchanged")
			}
			naddr := m.claimed(tc.claim)
			if !strings.HasPrefix(naddr, tc.pool) {
				t.Fatalf("regserver gave the claim %q, want one from %s0/24", naddr, tc.pool)
			}
			want := tc.state(naddr)
			m.check(t, "after the change", want)
			if got := keys(keyfiles(t, m.machine)); !equal(got, tc.keyfiles) {
				t.Errorf("keyfiles after the change: %v, want %v", got, tc.keyfiles)
			}
			for id, wants := range tc.kfWants {
				kf := m.keyfile(id)
				for _, w := range wants {
					if !bytes.Contains(kf, []byte(w)) {
						t.Errorf("keyfile %s lacks %q:\n%s", id, strings.TrimSpace(w), kf)
					}
				}
			}
			nmstateReboot(t, m, r, active, "new config", want)
			nmstateReboot(t, m, r, recovery, "recovery", want)
			nmstateCutOff(t, m, r, want)
		})
	}
}
