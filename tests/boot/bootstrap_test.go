//go:build bootsim

package boot

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// The bootstrap network (docs/bootstrap.md): no DHCP, and the test puts no address on
// the NIC. The agent finds the server unreachable, brings the bootstrap
// profile of its local config up under /run, registers, applies its pool
// address and drops the bootstrap profile.

const (
	// bootstrapProfile is the bootstrap template's connection id.
	bootstrapProfile = "bootstrap-" + nodeIf
	runtimeKeyfiles  = "run/NetworkManager/system-connections"
	// fastProbe shortens the agent's ARP probe clock (three probes 200 ms
	// apart and a 400 ms listen) in the cases that do not measure.
	fastProbe = "NODEREG_BOOTSTRAP_PROBE_INTERVAL=200ms"
)

// bootstrapConfig is the bootstrap block with the bootstrap profile's keyfile
// for the node's NIC (configurator nmconnections); the address comes from
// sources.
func bootstrapConfig(sources ...string) []string {
	lines := []string{
		"bootstrap-network:",
		"  configurator: nmconnections",
		"  config:",
		"    " + bootstrapProfile + ": |",
		"      [connection]",
		"      id=" + bootstrapProfile,
		"      type=ethernet",
		"      interface-name=" + nodeIf,
		"      autoconnect=false",
		"      [ipv4]",
		"      method=manual",
		"      address1={boot-ip}/24," + serverIP,
		"      dad-timeout=3000",
		"      [ipv6]",
		"      method=disabled",
		"  ipAddresses:",
		"    boot-ip:",
	}
	return append(lines, sources...)
}

// bootstrapNmstateConfig is the bootstrap block with an nmstate template
// (docs/bootstrap.md's range example on the lab's NIC and subnet): the
// address with its prefix and a default route via the server. Without
// nmstatectl the agent's built-in translator makes its keyfile.
func bootstrapNmstateConfig(sources ...string) []string {
	lines := []string{
		"bootstrap-network:",
		"  configurator: nmstate",
		"  config:",
		"    interfaces:",
		"    - name: " + nodeIf,
		"      type: ethernet",
		"      state: up",
		"      ipv4:",
		"        enabled: true",
		"        dhcp: false",
		"        address:",
		`        - ip: "{boot-ip}"`,
		"          prefix-length: 24",
		"      ipv6:",
		"        enabled: false",
		"    routes:",
		"      config:",
		"      - destination: 0.0.0.0/0",
		"        next-hop-address: " + serverIP,
		"        next-hop-interface: " + nodeIf,
		"  ipAddresses:",
		"    boot-ip:",
	}
	return append(lines, sources...)
}

func staticByMAC(mac, addr string) []string {
	return []string{"      static:", "      - mac: " + mac, "        address: " + addr}
}

// bootstrapRange is the range both nodes of the two-node case share: three
// addresses, the middle one held by a third host, so two are free.
var bootstrapRange = []string{
	"      range:",
	"        start: 10.231.0.50",
	"        end: 10.231.0.52",
	"        prefix: 24",
	"        gateway: " + serverIP,
}

// writeBootstrapConfig writes the registration config (auth mac) with the
// bootstrap block.
func (m *machine) writeBootstrapConfig(sources ...string) {
	m.writeConfig(append([]string{"auth: mac"}, bootstrapConfig(sources...)...)...)
}

// withoutNmstatectl is the agent's environment with no nmstatectl: the
// host's PATH minus any directory holding one, checked in the node with that
// environment.
func (m *machine) withoutNmstatectl() []string {
	m.t.Helper()
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "nmstatectl")); err != nil {
			dirs = append(dirs, d)
		}
	}
	env := []string{"PATH=" + strings.Join(dirs, ":"), "NODEREG_NMSTATECTL="}
	argv := m.inNode(append(append([]string{"env", m.busEnv}, env...), "sh", "-c", "command -v nmstatectl")...)
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err == nil {
		m.t.Fatalf("nmstatectl is on the agent's PATH (%s): the nmstate bootstrap needs a node without it", bytes.TrimSpace(out))
	}
	return env
}

// builtinLine is the agent's line saying which generator made the
// bootstrap keyfiles.
var builtinLine = regexp.MustCompile(`msg="bootstrap keyfiles generated" generator=builtin keyfiles=1 phase=bootstrap`)

// bootstrapKeyfiles lists the agent's runtime keyfiles under the root.
func (m *machine) bootstrapKeyfiles() []string {
	m.t.Helper()
	ents, err := os.ReadDir(m.path(runtimeKeyfiles))
	if err != nil && !os.IsNotExist(err) {
		m.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "nodereg-bootstrap-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// bootstrapProfiles lists the profiles NetworkManager holds from a bootstrap
// keyfile (by file, whatever the profile's id: the nmconnections template
// names it bootstrapProfile, nmstate after the interface).
func (m *machine) bootstrapProfiles() []string {
	m.t.Helper()
	out, err := m.nmcliOut("-t", "-f", "NAME,FILENAME", "connection", "show")
	if err != nil {
		m.t.Fatal(err)
	}
	var held []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "/"+runtimeKeyfiles+"/nodereg-bootstrap-") || strings.HasPrefix(l, bootstrapProfile+":") {
			held = append(held, l)
		}
	}
	return held
}

// bootstrapAddr is the address the agent's "bootstrap address up" line
// names ("" when it brought none up).
var upLine = regexp.MustCompile(`bootstrap address up.*\baddress=([0-9.]+)`)

func bootstrapAddr(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if m := upLine.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}

// poolAddr is the address regserver holds for the machine under claim
// inventory-ip.
func (m *machine) poolAddr() string {
	m.t.Helper()
	suffix := strings.ReplaceAll(m.mac, ":", "")
	for _, inv := range m.inventories() {
		if !strings.HasSuffix(inv.Name, suffix) {
			continue
		}
		for _, c := range inv.Claims {
			if c.Name == inv.Name+"-inventory-ip" {
				return c.Address
			}
		}
	}
	m.t.Fatalf("regserver holds no inventory-ip for %s: %+v", m.mac, m.inventories())
	return ""
}

// dhcpLessFirstBoot boots with no address on the NIC, checks there is none
// before the agent, runs it (extraEnv) and checks it registered through the
// bootstrap network and ends with only its pool address and no bootstrap
// profile. It returns the bootstrap and the pool address.
func dhcpLessFirstBoot(t *testing.T, m *machine, r *report, extraEnv []string) (boot, pool string) {
	t.Helper()
	m.boot(active, false)
	if got := m.addrs(); len(got) != 0 {
		t.Fatalf("before the agent the NIC has %v: the test must place no address", got)
	}
	res := m.runAgent(extraEnv)
	if res.code != 0 {
		t.Fatalf("DHCP-less first boot: agent exit %d, want 0", res.code)
	}
	boot = bootstrapAddr(res.out)
	if boot == "" {
		t.Fatalf("the agent brought no bootstrap address up")
	}
	pool = m.poolAddr()
	r.boot("NM start→pool address", m.waitAddr(m.nmStarted, cidr(pool)))
	checkOnlyPool(t, m, pool, "first boot")
	return boot, pool
}

// checkOnlyPool: the NIC carries only the pool address, NetworkManager
// holds no bootstrap profile and /run no bootstrap keyfile.
func checkOnlyPool(t *testing.T, m *machine, pool, when string) {
	t.Helper()
	if got := m.addrs(); !equal(got, []string{cidr(pool)}) {
		t.Errorf("%s: NIC has %v, want only the pool address %s", when, got, cidr(pool))
	}
	if p := m.bootstrapProfiles(); len(p) != 0 {
		t.Errorf("%s: NetworkManager still has the bootstrap profile(s) %v", when, p)
	}
	if kf := m.bootstrapKeyfiles(); len(kf) != 0 {
		t.Errorf("%s: bootstrap keyfiles left under /run: %v", when, kf)
	}
}

// rebootWithoutBootstrap reboots: the pool address comes back from /oem, no
// bootstrap profile exists, and the agent finds the server reachable.
func rebootWithoutBootstrap(t *testing.T, m *machine, r *report, pool string) {
	t.Helper()
	m.boot(active, false)
	r.boot("reboot", m.waitAddr(m.nmStarted, cidr(pool)))
	checkOnlyPool(t, m, pool, "after the reboot, before the agent")
	res := m.runAgent(nil)
	if res.code != 0 {
		t.Fatalf("after the reboot: agent exit %d", res.code)
	}
	if !strings.Contains(res.out, "bootstrap network not needed") || bootstrapAddr(res.out) != "" {
		t.Errorf("after the reboot the agent did not skip the bootstrap network")
	}
	checkOnlyPool(t, m, pool, "after the reboot and the agent")
}

// (a) and (c): static bootstrap address by MAC, RFC 5227 probe timing.
func TestBootstrapStaticByMAC(t *testing.T) {
	r, m := keyfileNode(t, "B1 no DHCP: static bootstrap by MAC")
	m.writeBootstrapConfig(staticByMAC(m.mac, "10.231.0.21")...)
	boot, pool := dhcpLessFirstBoot(t, m, r, nil)
	if boot != "10.231.0.21" {
		t.Errorf("bootstrap address %s, want the static entry's 10.231.0.21", boot)
	}
	if boot == pool {
		t.Errorf("pool address %s is the bootstrap address", pool)
	}
	rebootWithoutBootstrap(t, m, r, pool)
}

// (b) and (c): two nodes on one bridge share a range of three addresses
// whose middle one a third host holds. Node A's identity starts its walk at
// .50, node B's at .51 (held) and moves on to .52 (the offsets follow the
// documented hash of "uuid:<system UUID>"). They boot at the same time.
// The bootstrap template is nmstate, on nodes without nmstatectl: the
// built-in translator makes the bootstrap keyfile (B1 proves nmconnections).
// So is the IPAM template (the seed's), on the same NIC: both keyfiles come
// from one interface, and the bootstrap one must not shadow the IPAM one.
func TestBootstrapSharedRange(t *testing.T) {
	t.Parallel()
	r := newReport(t, "B2 no DHCP: two nodes share a range")
	a := machineOn(newLab(t, serverConfig(nmstateSeedTemplate)), "52:54:00:31:00:15") // range offset 0
	b := machineOn(a.addPeer("nrsrv1"), "52:54:00:31:00:11")                          // range offset 1
	a.addHolder("nrsrv2", "10.231.0.51")
	for _, m := range []*machine{a, b} {
		m.writeConfig(append([]string{"auth: mac"}, bootstrapNmstateConfig(bootstrapRange...)...)...)
		m.boot(active, false)
		if got := m.addrs(); len(got) != 0 {
			t.Fatalf("%s: before the agent the NIC has %v", m.mac, got)
		}
	}
	env := [][]string{a.withoutNmstatectl(), b.withoutNmstatectl()}
	var wg sync.WaitGroup
	res := make([]agentRun, 2)
	for i, m := range []*machine{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = m.runAgentNoFatal(env[i])
		}()
	}
	wg.Wait()
	for i, m := range []*machine{a, b} {
		if res[i].err != nil || res[i].code != 0 {
			t.Fatalf("%s: agent exit %d (%v)", m.mac, res[i].code, res[i].err)
		}
		if !builtinLine.MatchString(res[i].out) {
			t.Errorf("%s: the agent did not say the built-in translator made the one bootstrap keyfile", m.mac)
		}
	}
	bootA, bootB := bootstrapAddr(res[0].out), bootstrapAddr(res[1].out)
	if bootA != "10.231.0.50" || bootB != "10.231.0.52" {
		t.Errorf("bootstrap addresses %q and %q, want 10.231.0.50 and 10.231.0.52", bootA, bootB)
	}
	if !strings.Contains(res[1].out, "first-try=10.231.0.51") || !strings.Contains(res[1].out, "in-use=\"10.231.0.51 by") {
		t.Errorf("node B did not find the held 10.231.0.51 in use on its way")
	}
	for i := range res {
		if strings.Contains(res[i].out, "address=10.231.0.51 ") {
			t.Errorf("a node used the held address 10.231.0.51")
		}
	}
	poolA, poolB := a.poolAddr(), b.poolAddr()
	if poolA == poolB {
		t.Errorf("both nodes got pool address %s", poolA)
	}
	r.boot("A NM start→pool", a.waitAddr(a.nmStarted, cidr(poolA)))
	r.boot("B NM start→pool", b.waitAddr(b.nmStarted, cidr(poolB)))
	checkOnlyPool(t, a, poolA, "node A")
	checkOnlyPool(t, b, poolB, "node B")
	rebootWithoutBootstrap(t, a, r, poolA)
	rebootWithoutBootstrap(t, b, r, poolB)
}

// (d): the IPAM config cuts the node off: it is rolled back, the bootstrap
// profile is active again and kept, exit 75; the next run, with a template
// that works, reuses the bootstrap profile and then drops it.
func TestBootstrapCutOffKeepsBootstrap(t *testing.T) {
	r, m := labNode(t, "B3 no DHCP: cut-off IPAM keeps bootstrap", cutOffTemplate)
	m.writeBootstrapConfig(staticByMAC(m.mac, "10.231.0.21")...)
	m.boot(active, false)
	res := m.runAgent([]string{fastProbe})
	if res.code != 75 {
		t.Fatalf("cut-off template: agent exit %d, want 75", res.code)
	}
	if !strings.Contains(res.out, "reachability check") || !strings.Contains(res.out, "bootstrap network is up again") {
		t.Errorf("the agent's output does not say the reachability check failed and the bootstrap is back")
	}
	r.boot("NM start→bootstrap back", m.waitAddr(m.nmStarted, cidr("10.231.0.21")))
	if got := m.addrs(); !equal(got, []string{cidr("10.231.0.21")}) {
		t.Errorf("after the rollback the NIC has %v, want only the bootstrap address", got)
	}
	if kf := m.bootstrapKeyfiles(); len(kf) != 1 {
		t.Errorf("bootstrap keyfiles after the rollback: %v, want the one kept", kf)
	}
	if m.exists(keyfileDir+"/"+nodeIf+".nmconnection") || m.exists(applicator) {
		t.Errorf("the rolled-back IPAM keyfile or applicator is still there")
	}

	m.startServer(serverConfig(keyfileTemplate))
	res = m.runAgent([]string{fastProbe})
	if res.code != 0 {
		t.Fatalf("second run: agent exit %d", res.code)
	}
	if !strings.Contains(res.out, "bootstrap network of a previous run is up") {
		t.Errorf("the second run did not take over the kept bootstrap network")
	}
	pool := m.poolAddr()
	m.waitAddr(m.nmStarted, cidr(pool))
	checkOnlyPool(t, m, pool, "second run")
}

// (e): `--reset` from recovery and `--install` from a live-ISO-like root,
// neither with a persisted network config, register through the bootstrap
// network and hand the pool address to the toolkit.
func TestBootstrapResetAndInstall(t *testing.T) {
	t.Parallel()
	r := newReport(t, "B4 no DHCP: --reset and --install")
	stub := testbin.Build(t, "./tests/boot/elemental")
	bin := filepath.Join(t.TempDir(), "bin")
	must(t, os.MkdirAll(bin, 0o755))
	must(t, os.Symlink(stub, filepath.Join(bin, "elemental")))

	// The hook writes the new system's OEM files where the toolkit mounts
	// OEM during each operation.
	for _, c := range []struct{ flag, mode, verb, oem string }{
		{"--reset", recovery, "reset", "/oem"}, {"--install", active, "install", "/run/elemental/oem"},
	} {
		m := newMachine(t, serverConfig(keyfileTemplate))
		m.writeBootstrapConfig(staticByMAC(m.mac, "10.231.0.21")...)
		if c.flag == "--install" {
			// A live ISO: nothing persisted (an empty /oem), the config
			// on the media.
			cfg := m.read("oem/registration/config.yaml")
			must(t, os.RemoveAll(m.path("oem")))
			must(t, os.MkdirAll(m.path("oem"), 0o755))
			m.boot(c.mode, false)
			live := m.path("run/initramfs/live/livecd-cloud-config.yaml")
			must(t, os.MkdirAll(filepath.Dir(live), 0o755))
			must(t, os.WriteFile(live, append(cfg, []byte("  install:\n    device: /dev/vda\n")...), 0o600))
		} else {
			m.boot(c.mode, false)
		}
		if got := m.addrs(); len(got) != 0 {
			t.Fatalf("%s: before the agent the NIC has %v", c.flag, got)
		}
		calls := filepath.Join(t.TempDir(), "elemental-calls.jsonl")
		start := time.Now()
		res := m.runAgent([]string{"PATH=" + bin + ":" + os.Getenv("PATH"), "ELEMENTAL_STUB_LOG=" + calls, fastProbe}, c.flag)
		if res.code != 0 {
			t.Fatalf("%s: agent exit %d", c.flag, res.code)
		}
		if got := bootstrapAddr(res.out); got != "10.231.0.21" {
			t.Errorf("%s: bootstrap address %q, want 10.231.0.21", c.flag, got)
		}
		pool := m.poolAddr()
		call := elementalCalls(t, calls)
		if len(call) != 1 || call[0].Args[len(call[0].Args)-1] != c.verb {
			t.Fatalf("%s: elemental calls %+v, want one `elemental %s`", c.flag, call, c.verb)
		}
		hook := m.read("tmp/elemental/cloud-init/elemental-before-hook.yaml")
		app := hookFile(t, hook, "before-"+c.verb, c.oem+"/elemental-network.yaml")
		if !strings.Contains(app, "address1="+cidr(pool)) {
			t.Errorf("%s: the hook's applicator lacks the pool address %s:\n%s", c.flag, pool, app)
		}
		r.boot(c.verb+" registered", time.Since(start))
	}
}

// A node whose segment has DHCP (here: the address an installer or DHCP
// would have set, as in case 1) reaches the server as it is and never
// brings the bootstrap network up, though its config has one.
func TestBootstrapNotUsedWhenReachable(t *testing.T) {
	r, m := keyfileNode(t, "B0 DHCP works: bootstrap never brought up")
	m.writeBootstrapConfig(staticByMAC(m.mac, "10.231.0.21")...)
	m.boot(active, true)
	res := m.runAgent(nil)
	if res.code != 0 {
		t.Fatalf("agent exit %d", res.code)
	}
	if !strings.Contains(res.out, "bootstrap network not needed") || bootstrapAddr(res.out) != "" {
		t.Errorf("the agent did not skip the bootstrap network")
	}
	pool := m.poolAddr()
	r.boot("first", m.waitAddr(m.nmStarted, cidr(pool)))
	checkOnlyPool(t, m, pool, "DHCP-like first boot")
}
