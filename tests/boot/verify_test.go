//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
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
	t.Parallel()
	r := newReport(t, "verify: after a boot, then the address removed by hand")
	m := newMachine(t, serverConfig(keyfileTemplate))
	addr := firstBoot(t, m, r)

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
