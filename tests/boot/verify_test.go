//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// verifyRun is one `agent verify --format json` in the node's namespace.
type verifyRun struct {
	code     int
	Exit     int `json:"exit"`
	Findings []struct {
		Name, Status, Detail string
	} `json:"findings"`
}

func (v verifyRun) status(name string) (string, string) {
	for _, f := range v.Findings {
		if f.Name == name {
			return f.Status, f.Detail
		}
	}
	return "", ""
}

// runVerify runs the agent's verify as nodereg-verify.service would, with
// the namespace's NetworkManager on the private bus.
func (m *machine) runVerify() verifyRun {
	m.t.Helper()
	argv := m.inNode("env", m.busEnv, m.agent, "verify", "--root", m.root, "--format", "json")
	cmd := exec.Command(argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var v verifyRun
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		v.code = ee.ExitCode()
	case err != nil:
		m.t.Fatalf("running verify: %v", err)
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		m.t.Fatalf("verify output: %v\n%s%s", err, out.String(), errb.String())
	}
	m.t.Logf("verify: exit %d\n%s", v.code, out.String())
	return v
}

// Verify after a first boot: every finding passes, the profiles one with
// the real NetworkManager's active profile; then the pool address removed
// by hand: the addresses finding names it, and as it was the node's only
// way to the server the server finding fails too: exit 4 + 16.
func TestVerifyAfterBootAndAfterTheAddressIsRemoved(t *testing.T) {
	_, m, addr := bootedNode(t, "verify: after a boot, then the address removed by hand")

	v := m.runVerify()
	if v.code != 0 || v.Exit != 0 {
		t.Fatalf("after the boot: verify exit %d (report %d), want 0", v.code, v.Exit)
	}
	for _, name := range []string{"registered", "applicator", "addresses", "profiles", "server", "bootstrap"} {
		if st, detail := v.status(name); st != "ok" {
			t.Errorf("after the boot: %s is %q (%s), want ok", name, st, detail)
		}
	}

	run(t, m.inNode("ip", "addr", "del", cidr(addr), "dev", nodeIf)...)
	v = m.runVerify()
	if v.code != 4+16 {
		t.Errorf("address removed: verify exit %d, want 20 (addresses, server)", v.code)
	}
	if st, _ := v.status("server"); st != "failed" {
		t.Errorf("address removed: server is %q, want failed (no route to it left)", st)
	}
	if st, detail := v.status("addresses"); st != "failed" || !strings.Contains(detail, cidr(addr)+" missing on "+nodeIf) {
		t.Errorf("address removed: addresses is %q %q, want it to name %s", st, detail, cidr(addr))
	}
}

// withoutNetworkError is a state file without the keys of a kept network
// error (docs/annotations.md).
func withoutNetworkError(st []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(st, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("nodereg-network-error")) {
			out = append(out, line...)
		}
	}
	return out
}

// annotations are the only inventory's annotations as regserver stored
// them, read through its admin API.
func (m *machine) annotations() map[string]string {
	m.t.Helper()
	b, err := m.admin(http.MethodGet, "/admin/inventories")
	if err != nil {
		m.t.Fatalf("regserver inventories: %v", err)
	}
	var invs []struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(b, &invs); err != nil || len(invs) != 1 {
		m.t.Fatalf("regserver inventories: %v, %d of them: %s", err, len(invs), b)
	}
	return invs[0].Annotations
}

// A rolled-back apply reaches regserver at the next registration, per
// interface, and is cleared there once the applied config is what the
// server asks for again; an applied node shows its state and digest.
func TestNetworkStateStoredByRegserver(t *testing.T) {
	_, m, _ := bootedNode(t, "annotations: applied, rolled back, cleared, as regserver stored them")
	const p = "elemental.cattle.io/network-config."
	if res := m.runAgent(nil); res.code != 0 {
		t.Fatalf("update: exit %d", res.code)
	}
	a := m.annotations()
	if a[p+"state"] != "applied" || a[p+nodeIf+".state"] != "applied" || !strings.HasPrefix(a[p+nodeIf+".digest"], "sha256:") {
		t.Errorf("applied node: regserver stored %v", a)
	}

	m.startServer(serverConfig(cutOffTemplate))
	if res := m.runAgent(nil); res.code != 75 {
		t.Fatalf("cut-off template: exit %d, want 75", res.code)
	}
	// The next registration carries it (and is rolled back again).
	if res := m.runAgent(nil); res.code != 75 {
		t.Fatalf("cut-off template again: exit %d, want 75", res.code)
	}
	a = m.annotations()
	if a[p+"state"] != "error" || a[p+nodeIf+".state"] != "error" || a[p+nodeIf+".error-kind"] != "rolled-back" ||
		a[p+nodeIf+".error-phase"] != "apply" || !strings.Contains(a[p+nodeIf+".error"], "reachability check") {
		t.Errorf("after a rollback: regserver stored %v", a)
	}

	m.startServer(serverConfig(keyfileTemplate))
	for i := 0; i < 2; i++ { // the first clears the error, the second reports it cleared
		if res := m.runAgent(nil); res.code != 0 {
			t.Fatalf("template restored: exit %d", res.code)
		}
	}
	a = m.annotations()
	if a[p+"state"] != "applied" || a[p+nodeIf+".state"] != "applied" || a[p+nodeIf+".error"] != "" || a[p+"error"] != "" {
		t.Errorf("after the restored template: regserver stored %v", a)
	}
}

// Verify on an nmstate bridge (built-in translator, no nmstatectl): the
// address is checked on the bridge, its active profile is ours; a
// NetworkManager profile of someone else's taking the bridge fails the
// profiles finding, naming it.
func TestVerifyNmstateBridge(t *testing.T) {
	t.Parallel()
	r := newReport(t, "verify: nmstate bridge, then a foreign profile on it")
	m := newNmstateMachine(t, nmstateServerConfig(nmstateSeedTemplate))
	nmstateFirstBoot(t, m, r)
	m.startServer(nmstateServerConfig(nmstateBridgeTemplate))
	start := m.boot(active, false)
	m.waitAddrOn(t, start, nodeIf, cidr(m.claimed("inventory-ip")))
	m.register(t, "bridge template", 0)
	addr := m.claimed("bridge-ip")
	m.waitAddrOn(t, time.Now(), bridgeIf, cidr(addr))

	v := m.runVerify()
	if v.code != 0 {
		t.Fatalf("bridge: verify exit %d, want 0", v.code)
	}
	if _, detail := v.status("addresses"); !strings.Contains(detail, "1 addresses on 1 interfaces") {
		t.Errorf("bridge: addresses finding %q, want the bridge's one address", detail)
	}

	// Someone else's profile for the bridge, activated by hand.
	if err := m.nmcli("connection", "add", "type", "bridge", "con-name", "admin-br", "ifname", bridgeIf,
		"ipv4.method", "manual", "ipv4.addresses", cidr(addr), "ipv6.method", "disabled"); err != nil {
		t.Fatal(err)
	}
	if err := m.nmcli("connection", "up", "admin-br"); err != nil {
		t.Fatal(err)
	}
	v = m.runVerify()
	if st, detail := v.status("profiles"); st != "failed" || !strings.Contains(detail, `active profile "admin-br"`) || v.code&8 == 0 {
		t.Errorf("foreign profile: profiles %q %q, exit %d; want it failed naming admin-br", st, detail, v.code)
	}
}

// Drift repair with the real NetworkManager: an address of the applied
// config removed by hand (not the one the server is reached by) is found
// by the update run (--repair-drift), put back through the live apply, and
// reported to regserver as drift-repaired; the boot run leaves it.
func TestUpdateRunRepairsARemovedAddress(t *testing.T) {
	_, m, addr := bootedNode(t, "drift: an address removed by hand, put back by the update run")
	m.startServer(serverConfig(changedTemplate))
	if res := m.runAgent(nil); res.code != 0 {
		t.Fatalf("changed template: exit %d", res.code)
	}
	second := m.claimed("second-ip")
	want := []string{cidr(addr), cidr(second)}
	if got := m.addrs(); !equal(got, want) {
		t.Fatalf("after the change the NIC has %v, want %v", got, want)
	}

	run(t, m.inNode("ip", "addr", "del", cidr(second), "dev", nodeIf)...)
	if v := m.runVerify(); v.code != 4 {
		t.Fatalf("second address removed: verify exit %d, want 4", v.code)
	}
	if res := m.runAgent(nil); res.code != 0 || !equal(m.addrs(), []string{cidr(addr)}) {
		t.Fatalf("boot run: exit %d, NIC %v: it must leave drift alone", res.code, m.addrs())
	}
	if res := m.runAgent(nil, "--repair-drift"); res.code != 0 || !strings.Contains(res.out, "drift repaired") {
		t.Fatalf("update run: exit %d, no repair said", res.code)
	}
	if got := m.addrs(); !equal(got, want) {
		t.Errorf("after the repair the NIC has %v, want %v", got, want)
	}
	if v := m.runVerify(); v.code != 0 {
		t.Errorf("after the repair: verify exit %d, want 0", v.code)
	}
	if res := m.runAgent(nil, "--repair-drift"); res.code != 0 {
		t.Fatalf("next update: exit %d", res.code)
	}
	got := m.annotations()["elemental.cattle.io/network-config.drift-repaired"]
	if !strings.Contains(got, cidr(second)+" missing on "+nodeIf) {
		t.Errorf("regserver stored drift-repaired %q, want the removed address named", got)
	}
}
