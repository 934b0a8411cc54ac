//go:build bootsim

package boot

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/tpm/tpmtest"
)

// Pools: pool-a is the lab subnet, so a live apply keeps the server
// reachable; pool-b is a subnet nothing routes to, for the cut-off case.
const pools = `
pools:
- name: pool-a
  addresses: [10.231.0.100-10.231.0.120]
  prefix: 24
  gateway: 10.231.0.1
- name: pool-b
  addresses: [10.240.0.10-10.240.0.20]
  prefix: 24
`

// profile is the connection id of the templates. It differs from the
// interface name on purpose: see TestProfileNamedLikeTheInterface.
const profile = "nodereg-boot"

// keyfileTemplate is the nmconnections template of the first boot: one
// profile for the node's NIC, the pool address with the server as gateway.
const keyfileTemplate = `
    configurator: nmconnections
    ipAddresses:
      inventory-ip: pool-a
    config:
      ` + nodeIf + `: |
        [connection]
        id=` + profile + `
        type=ethernet
        interface-name=` + nodeIf + `

        [ipv4]
        method=manual
        address1={inventory-ip}/24,10.231.0.1

        [ipv6]
        method=disabled
`

// changedTemplate adds a second address and a route, under a new profile
// name, so the old keyfile must go.
const changedTemplate = `
    configurator: nmconnections
    ipAddresses:
      inventory-ip: pool-a
      second-ip: pool-a
    config:
      ` + nodeIf + `-v2: |
        [connection]
        id=` + profile + `-v2
        type=ethernet
        interface-name=` + nodeIf + `

        [ipv4]
        method=manual
        address1={inventory-ip}/24,10.231.0.1
        address2={second-ip}/24
        route1=10.232.7.0/24,10.231.0.1,150

        [ipv6]
        method=disabled
`

// cutOffTemplate puts the NIC on a subnet from which the server cannot be
// reached: keyfileTemplate's profile with a pool-b address and no gateway.
var cutOffTemplate = strings.NewReplacer(
	"inventory-ip: pool-a", "cut-ip: pool-b",
	"address1={inventory-ip}/24,10.231.0.1", "address1={cut-ip}/24",
).Replace(keyfileTemplate)

func serverConfig(network string) string {
	return `
registrations:
- name: boot
  token: boot-token
  machineName: m-${System Information/UUID}
  config:
    elemental:
      registration:
        auth: mac
      reset:
        enabled: true
        reset-persistent: true
        reset-oem: true
        reboot: true
  network:` + network + pools
}

// report prints the case's one summary line when it ends, whatever the
// outcome: the boots' times from "boot" to the address being up.
type report struct {
	name  string
	times []string
}

func newReport(t *testing.T, name string) *report {
	r := &report{name: name}
	t.Cleanup(func() {
		outcome := "PASS"
		switch {
		case t.Skipped():
			outcome = "SKIP"
		case t.Failed():
			outcome = "FAIL"
		}
		times := strings.Join(r.times, ", ")
		if times == "" {
			times = "-"
		}
		fmt.Printf("bootsim: %-4s %-44s boot→address up: %s\n", outcome, r.name, times)
	})
	return r
}

func (r *report) boot(label string, d time.Duration) {
	r.times = append(r.times, fmt.Sprintf("%s %s", label, d.Round(time.Millisecond)))
}

func sorted(l []string) []string {
	c := append([]string(nil), l...)
	sort.Strings(c)
	return c
}

func equal(a, b []string) bool {
	return strings.Join(sorted(a), ",") == strings.Join(sorted(b), ",")
}

func cidr(addr string) string { return fmt.Sprintf("%s/%d", addr, prefixLen) }

// labNode starts a parallel case on a machine of its own whose server
// hands out the network template: the case's report and the machine.
func labNode(t *testing.T, title, template string) (*report, *machine) {
	t.Helper()
	t.Parallel()
	return newReport(t, title), newMachine(t, serverConfig(template))
}

// keyfileNode is labNode with keyfileTemplate, the first boot's.
func keyfileNode(t *testing.T, title string) (*report, *machine) {
	t.Helper()
	return labNode(t, title, keyfileTemplate)
}

// bootedNode is keyfileNode after firstBoot, where most cases begin; it
// returns the pool address too.
func bootedNode(t *testing.T, title string) (*report, *machine, string) {
	t.Helper()
	r, m := keyfileNode(t, title)
	return r, m, firstBoot(t, m, r)
}

// firstBoot is case 1's boot, the start of every other case: the NIC has a
// bootstrap address, the agent registers, gets its pool address, persists
// it and applies it live; it returns the pool address.
func firstBoot(t *testing.T, m *machine, r *report) string {
	t.Helper()
	start := m.boot(active, true)
	if got := m.addrs(); !equal(got, []string{cidr(bootstrap)}) {
		t.Fatalf("first boot: before the agent the NIC has %v, want only the bootstrap address", got)
	}
	res := m.runAgent(nil)
	if res.code != 0 {
		t.Fatalf("first boot: agent exit %d, want 0", res.code)
	}
	addr := m.claimed("inventory-ip")
	if addr == "" {
		t.Fatal("first boot: regserver holds no address for the machine")
	}
	r.boot("first", m.waitAddr(start, cidr(addr)))
	if got := m.addrs(); !equal(got, []string{cidr(addr)}) {
		t.Errorf("first boot: NIC has %v, want only the pool address %s", got, cidr(addr))
	}
	if got := m.routes(); !slices.Contains(got, "default via "+serverIP) {
		t.Errorf("first boot: routes %v lack the template's gateway %s", got, serverIP)
	}
	kf := m.read(keyfileDir + "/" + nodeIf + ".nmconnection")
	if !bytes.Contains(kf, []byte("address1="+cidr(addr)+",10.231.0.1")) {
		t.Errorf("first boot: keyfile lacks the pool address:\n%s", kf)
	}
	if !bytes.Contains(m.read(applicator), []byte("address1="+cidr(addr))) {
		t.Errorf("first boot: the applicator under /oem lacks the pool address")
	}
	if !slices.Contains(m.profiles(), profile) {
		t.Errorf("first boot: NetworkManager profiles %v lack %s", m.profiles(), profile)
	}
	return addr
}

// Case 1: the agent's keyfile is one NetworkManager accepts, applied live
// with the server still reachable afterwards.
func TestCase1FirstBoot(t *testing.T) {
	_, m, addr := bootedNode(t, "1 first boot: pool address applied live")
	if !strings.HasPrefix(addr, "10.231.0.") {
		t.Errorf("regserver gave %s, outside pool-a", addr)
	}
	// The server is reachable over the new address: a registration update
	// goes through (the agent's own check passed, or it would have rolled
	// back and exited 75).
	if res := m.runAgent(nil); res.code != 0 {
		t.Errorf("update over the pool address: agent exit %d", res.code)
	}
}

// Case 1 with the TPM: the agent proves its identity with swtpm, reached
// from the node's namespace through its unix socket.
func TestCase1FirstBootTPM(t *testing.T) {
	t.Parallel()
	r := newReport(t, "1 first boot with swtpm: pool address")
	m := newMachine(t, strings.Replace(serverConfig(keyfileTemplate), "auth: mac", "auth: tpm", 1))
	sw := tpmtest.StartSwtpm(t, false)
	m.writeConfig("auth: tpm", "tpm-device: "+sw.Device())
	firstBoot(t, m, r)
	invs := m.inventories()
	if len(invs) != 1 || invs[0].AuthKind != "tpm" {
		t.Errorf("regserver's inventories %+v: want one registered with tpm", invs)
	}
	rebootUnchanged(t, m, r, active, "reboot", []string{cidr(m.claimed("inventory-ip"))})
}

// rebootUnchanged reboots into mode and checks that the applicator under /oem
// brought addr up before the agent ran, and the agent's update changed
// nothing.
func rebootUnchanged(t *testing.T, m *machine, r *report, mode, label string, want []string) {
	t.Helper()
	kfBefore := keyfiles(t, m)
	appBefore := m.read(applicator)
	start := m.boot(mode, false)
	r.boot(label, m.waitAddr(start, want[0]))
	if got := m.addrs(); !equal(got, want) {
		t.Errorf("%s: before the agent the NIC has %v, want %v", label, got, want)
	}
	if got := keyfiles(t, m); !equalMaps(got, kfBefore) {
		t.Errorf("%s: the initramfs stage recreated %v, want %v", label, keys(got), keys(kfBefore))
	}
	res := m.runAgent(nil)
	if res.code != 0 {
		t.Fatalf("%s: agent exit %d", label, res.code)
	}
	if !strings.Contains(res.out, "unchanged since the last run") {
		t.Errorf("%s: the agent did not find the config unchanged", label)
	}
	if !bytes.Equal(m.read(applicator), appBefore) {
		t.Errorf("%s: the agent rewrote the applicator", label)
	}
	if got := keyfiles(t, m); !equalMaps(got, kfBefore) {
		t.Errorf("%s: the agent changed the keyfiles", label)
	}
	if got := m.addrs(); !equal(got, want) {
		t.Errorf("%s: after the agent the NIC has %v, want %v", label, got, want)
	}
}

// Case 2: the ephemeral /etc is gone at reboot; the yip applicator recreates
// the keyfile and NetworkManager brings the address up before the agent.
func TestCase2Reboot(t *testing.T) {
	r, m, addr := bootedNode(t, "2 reboot: address back before the agent")
	rebootUnchanged(t, m, r, active, "reboot", []string{cidr(addr)})
	if got := m.claimed("inventory-ip"); got != addr {
		t.Errorf("regserver now holds %s for the machine, want %s", got, addr)
	}
}

// Case 3: recovery (and the passive system) come up with the same address.
func TestCase3Recovery(t *testing.T) {
	r, m, addr := bootedNode(t, "3 recovery (and passive): same address")
	rebootUnchanged(t, m, r, recovery, "recovery", []string{cidr(addr)})
	rebootUnchanged(t, m, r, passive, "passive", []string{cidr(addr)})
}

// Case 4: a changed template is applied at the next boot, once: the old
// profile is gone, the new addresses and route are up, and a later boot
// brings them up from /oem with nothing left to apply.
func TestCase4TemplateChange(t *testing.T) {
	r, m, addr := bootedNode(t, "4 template change: applied once")
	oldKeyfile := m.read(keyfileDir + "/" + nodeIf + ".nmconnection")
	m.startServer(serverConfig(changedTemplate))

	start := m.boot(active, false)
	r.boot("old config", m.waitAddr(start, cidr(addr)))
	if got := m.keyfile(nodeIf); !bytes.Equal(got, oldKeyfile) {
		t.Errorf("before the agent the initramfs stage wrote another keyfile:\n%s", got)
	}
	res := m.runAgent(nil)
	if res.code != 0 {
		t.Fatalf("changed template: agent exit %d", res.code)
	}
	if strings.Contains(res.out, "unchanged since the last run") {
		t.Fatal("changed template: the agent found the config unchanged")
	}
	second := m.claimed("second-ip")
	if got := m.claimed("inventory-ip"); got != addr {
		t.Errorf("regserver moved the first address from %s to %s", addr, got)
	}
	want := []string{cidr(addr), cidr(second)}
	if got := m.addrs(); !equal(got, want) {
		t.Errorf("after the change the NIC has %v, want %v", got, want)
	}
	if got := m.routes(); !slices.Contains(got, "10.232.7.0/24 via "+serverIP) {
		t.Errorf("routes %v lack the template's 10.232.7.0/24", got)
	}
	if m.exists(keyfileDir + "/" + nodeIf + ".nmconnection") {
		t.Error("the old keyfile is still there")
	}
	if got := m.profiles(); slices.Contains(got, profile) || !slices.Contains(got, profile+"-v2") {
		t.Errorf("NetworkManager profiles %v: want %s-v2 and not %s", got, profile, profile)
	}
	if app := m.read(applicator); bytes.Contains(app, []byte(nodeIf+".nmconnection")) || !bytes.Contains(app, []byte("address2="+cidr(second))) {
		t.Errorf("applicator after the change:\n%s", app)
	}
	rebootUnchanged(t, m, r, active, "new config", want)
}

// Case 5: a template that cuts the node off fails the reachability check;
// the agent rolls back to the working keyfile and applicator, exit 75.
func TestCase5CutOffRollsBack(t *testing.T) {
	r, m, addr := bootedNode(t, "5 cut-off template: rolled back, exit 75")
	oldKeyfile := m.keyfile(nodeIf)
	oldApplicator := m.read(applicator)
	oldManifest := m.read(manifest)
	oldState := m.read(stateFile)
	m.startServer(serverConfig(cutOffTemplate))

	start := m.boot(active, false)
	r.boot("reboot", m.waitAddr(start, cidr(addr)))
	res := m.runAgent(nil)
	if res.code != 75 {
		t.Fatalf("cut-off template: agent exit %d, want 75", res.code)
	}
	if !strings.Contains(res.out, "reachability check") {
		t.Errorf("the agent's failure does not name the reachability check")
	}
	cut := m.claimed("cut-ip")
	if !strings.HasPrefix(cut, "10.240.0.") {
		t.Errorf("regserver gave the cut-off claim %q, want a pool-b address", cut)
	}
	if got := m.addrs(); !equal(got, []string{cidr(addr)}) {
		t.Errorf("after the rollback the NIC has %v, want only %s", got, cidr(addr))
	}
	if got := m.keyfile(nodeIf); !bytes.Equal(got, oldKeyfile) {
		t.Errorf("keyfile after the rollback:\n%s\nwant:\n%s", got, oldKeyfile)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{applicator, oldApplicator}, {manifest, oldManifest}} {
		if !bytes.Equal(m.read(f.path), f.want) {
			t.Errorf("%s changed by a rolled-back apply", f.path)
		}
	}
	// The state file gains the error it reports back, nothing else.
	if st := m.read(stateFile); !bytes.Equal(withoutNetworkError(st), oldState) || !bytes.Contains(st, []byte("nodereg-network-error-kind: rolled-back")) {
		t.Errorf("state file after a rolled-back apply:\n%s\nwant the previous one plus the error", st)
	}
	// The way back is also what the next boot brings up.
	start = m.boot(active, false)
	r.boot("after rollback", m.waitAddr(start, cidr(addr)))
}

// Case 7: --reset-network removes what the agent wrote and nothing else, and
// NetworkManager lets go of the address.
func TestCase7ResetNetwork(t *testing.T) {
	_, m, addr := bootedNode(t, "7 reset-network: ours gone, foreign kept")
	foreign := []byte("[connection]\nid=foreign\ntype=ethernet\ninterface-name=nrforeign0\nautoconnect=false\n\n[ipv4]\nmethod=manual\naddress1=10.99.0.5/24\n\n[ipv6]\nmethod=disabled\n")
	foreignPath := m.path(keyfileDir + "/foreign.nmconnection")
	must(t, os.WriteFile(foreignPath, foreign, 0o600))
	must(t, m.nmcli("connection", "reload"))
	if got := m.profiles(); !slices.Contains(got, "foreign") {
		t.Fatalf("NetworkManager did not load the foreign profile: %v", got)
	}

	res := m.runAgent(nil, "--reset-network")
	if res.code != 0 {
		t.Fatalf("--reset-network: exit %d", res.code)
	}
	for _, p := range []string{keyfileDir + "/" + nodeIf + ".nmconnection", applicator, manifest} {
		if m.exists(p) {
			t.Errorf("--reset-network left %s", p)
		}
	}
	if b, err := os.ReadFile(foreignPath); err != nil || !bytes.Equal(b, foreign) {
		t.Errorf("the foreign keyfile was touched: %v\n%s", err, b)
	}
	got := m.profiles()
	if slices.Contains(got, profile) || !slices.Contains(got, "foreign") {
		t.Errorf("NetworkManager profiles after --reset-network: %v, want foreign and not %s", got, profile)
	}
	// NetworkManager deconfigures the device once its profile is gone.
	waitFor(t, "NetworkManager to drop "+addr, func() bool { return !slices.Contains(m.addrs(), cidr(addr)) },
		func() string { return fmt.Sprintf("addresses: %v", m.addrs()) })
	// And the next boot brings nothing of ours back.
	m.boot(recovery, false)
	if got := m.addrs(); slices.Contains(got, cidr(addr)) {
		t.Errorf("the boot after --reset-network brought %s back: %v", addr, got)
	}
	if m.exists(keyfileDir + "/" + nodeIf + ".nmconnection") {
		t.Error("the boot after --reset-network recreated our keyfile")
	}
}

// Case 6: reset from recovery. The inventory is deleted on the server, its
// address goes to another machine, `agent --reset` registers anew, writes
// the before-reset hook with the new applicator and runs `elemental reset`;
// after the simulated reset and reboot the new address is up.
func TestCase6Reset(t *testing.T) {
	r, m, old := bootedNode(t, "6 reset from recovery: new address")
	rebootUnchanged(t, m, r, recovery, "recovery", []string{cidr(old)})

	invs := m.inventories()
	if len(invs) != 1 {
		t.Fatalf("regserver has %d inventories, want 1", len(invs))
	}
	if _, err := m.admin(http.MethodDelete, "/admin/inventories/"+invs[0].Name); err != nil {
		t.Fatalf("deleting the inventory: %v", err)
	}
	// Another machine registers meanwhile and takes the released address.
	other := m.registerOther(t)
	if other != old {
		t.Fatalf("the other machine got %s, want the released %s", other, old)
	}

	stub := testbin.Build(t, "./tests/boot/elemental")
	bin := filepath.Join(t.TempDir(), "bin")
	must(t, os.MkdirAll(bin, 0o755))
	must(t, os.Symlink(stub, filepath.Join(bin, "elemental")))
	calls := filepath.Join(t.TempDir(), "elemental-calls.jsonl")
	res := m.runAgent([]string{"PATH=" + bin + ":" + os.Getenv("PATH"), "ELEMENTAL_STUB_LOG=" + calls}, "--reset")
	if res.code != 0 {
		t.Fatalf("--reset: exit %d", res.code)
	}
	var fresh string
	for _, inv := range m.inventories() {
		if !strings.HasSuffix(inv.Name, "525400310002") {
			continue
		}
		for _, c := range inv.Claims {
			if c.Name == inv.Name+"-inventory-ip" {
				fresh = c.Address
			}
		}
	}
	if fresh == "" || fresh == old {
		t.Fatalf("after --reset regserver assigned %q to the machine, want a new address (inventories %+v)", fresh, m.inventories())
	}
	call := elementalCalls(t, calls)
	if len(call) != 1 || call[0].Args[len(call[0].Args)-1] != "reset" {
		t.Fatalf("elemental calls: %+v, want one `elemental reset`", call)
	}
	if got := call[0].Env["ELEMENTAL_CLOUD_INIT_PATHS"]; got != "/tmp/elemental/cloud-init" {
		t.Errorf("ELEMENTAL_CLOUD_INIT_PATHS=%q", got)
	}
	if got := call[0].Env["ELEMENTAL_RESET_OEM"]; got != "true" {
		t.Errorf("ELEMENTAL_RESET_OEM=%q, want the server's reset-oem: true", got)
	}
	hook := m.read("tmp/elemental/cloud-init/elemental-before-hook.yaml")
	app := hookFile(t, hook, "before-reset", "/oem/elemental-network.yaml")
	if !strings.Contains(app, "address1="+cidr(fresh)) || strings.Contains(app, cidr(old)) {
		t.Errorf("the hook's applicator does not carry the new address %s:\n%s", fresh, app)
	}

	// The reset: reset-oem formats OEM, then before-reset runs the hook
	// from ELEMENTAL_CLOUD_INIT_PATHS; then the node reboots.
	must(t, os.RemoveAll(m.path("oem")))
	must(t, os.MkdirAll(m.path("oem"), 0o755))
	if err := runStage(m.root, "/tmp/elemental/cloud-init", "before-reset"); err != nil {
		t.Fatalf("before-reset stage: %v", err)
	}
	must(t, os.RemoveAll(m.path("tmp")))
	start := m.boot(active, false)
	r.boot("after reset", m.waitAddr(start, cidr(fresh)))
	if got := m.addrs(); !equal(got, []string{cidr(fresh)}) {
		t.Errorf("after the reset the NIC has %v, want only %s", got, cidr(fresh))
	}
	if res := m.runAgent(nil); res.code != 0 {
		t.Errorf("first boot after the reset: agent exit %d", res.code)
	}
	if got := m.addrs(); !equal(got, []string{cidr(fresh)}) {
		t.Errorf("after the agent the NIC has %v, want only %s", got, cidr(fresh))
	}
}

// registerOther registers a second machine (dry run, from the server's
// namespace) and returns its address.
func (m *machine) registerOther(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	nic := filepath.Join(root, "sys/class/net/eth0")
	must(t, os.MkdirAll(nic, 0o755))
	must(t, os.WriteFile(filepath.Join(nic, "address"), []byte("52:54:00:31:00:99\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(nic, "addr_assign_type"), []byte("0\n"), 0o644))
	dmi := filepath.Join(root, "sys/class/dmi/id")
	must(t, os.MkdirAll(dmi, 0o755))
	must(t, os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte("00000000-0000-4000-8000-525400310099\n"), 0o644))
	cfg := filepath.Join(root, "oem/registration/config.yaml")
	must(t, os.MkdirAll(filepath.Dir(cfg), 0o700))
	must(t, os.WriteFile(cfg, []byte("elemental:\n  registration:\n    url: "+m.url()+"\n    auth: mac\n"), 0o600))
	run(t, labkit.InNS(m.srvNS, m.agent, "--root", root, "--dry-run", "--deadline", "30s", "--network-timeout", "30s")...)
	for _, inv := range m.inventories() {
		if strings.HasSuffix(inv.Name, "525400310099") {
			for _, c := range inv.Claims {
				return c.Address
			}
		}
	}
	t.Fatalf("the other machine has no claim: %+v", m.inventories())
	return ""
}

type elementalCall struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
}

func elementalCalls(t *testing.T, path string) []elementalCall {
	t.Helper()
	return testutil.JSONLines[elementalCall](t, path)
}

// hookFile returns the content the hook's stage writes to path.
func hookFile(t *testing.T, hook []byte, stage, path string) string {
	t.Helper()
	var cfg struct {
		Stages map[string][]struct {
			Files []struct {
				Path    string `yaml:"path"`
				Content string `yaml:"content"`
			} `yaml:"files"`
		} `yaml:"stages"`
	}
	if err := yaml.Unmarshal(hook, &cfg); err != nil {
		t.Fatalf("before-reset hook is not YAML: %v", err)
	}
	for _, step := range cfg.Stages[stage] {
		for _, f := range step.Files {
			if f.Path == path {
				return f.Content
			}
		}
	}
	t.Fatalf("the hook's %s stage writes no %s:\n%s", stage, path, hook)
	return ""
}

func (m *machine) keyfile(id string) []byte {
	m.t.Helper()
	return m.read(keyfileDir + "/" + id + ".nmconnection")
}

// keyfiles maps the keyfile directory's file names to their contents.
func keyfiles(t *testing.T, m *machine) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(m.path(keyfileDir))
	must(t, err)
	out := map[string]string{}
	for _, e := range entries {
		out[e.Name()] = string(m.read(keyfileDir + "/" + e.Name()))
	}
	return out
}

func keys(m map[string]string) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// A profile whose id is the interface name, the common way to write a
// template (upstream's examples do), on a NIC that already carries an
// address when NetworkManager starts: NetworkManager then holds a generated
// in-memory profile of the same id for the externally configured device, and
// `nmcli connection up id <id>` may activate that one instead of the
// keyfile's.
func TestProfileNamedLikeTheInterface(t *testing.T) {
	r, m := labNode(t, "1b first boot: profile id = interface name", strings.ReplaceAll(keyfileTemplate, "id="+profile, "id="+nodeIf))
	start := m.boot(active, true)
	if res := m.runAgent(nil); res.code != 0 {
		t.Fatalf("agent exit %d", res.code)
	}
	addr := m.claimed("inventory-ip")
	r.boot("first", m.waitAddr(start, cidr(addr)))
	if got := m.addrs(); !equal(got, []string{cidr(addr)}) {
		t.Errorf("NIC has %v, want only %s", got, cidr(addr))
	}
}
