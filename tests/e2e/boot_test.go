package e2e

import (
	"bytes"
	"github.com/nodereg/nodereg/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
)

const applicator = "oem/elemental-network.yaml"

func count(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	testutil.Must(t, err)
	return b
}

// First boot persists and applies; a second boot with the same config from
// the server runs no nmstatectl at all; a changed template is applied once.
func TestBootAppliesOnlyWhenTheConfigChanged(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	calls := useStubNmstatectl(t)
	m := newMachine(t, "52:54:00:00:10:01", rs.url())

	res, err := m.run(nil)
	if err != nil || !res.Applied {
		t.Fatalf("first boot: %+v %v", res, err)
	}
	got := calls.Subcommands(t)
	if count(got, "gc") != 1 || count(got, "apply --no-commit") != 1 || count(got, "commit") != 1 || count(got, "rollback") != 0 {
		t.Errorf("first boot nmstatectl calls: %q", got)
	}
	st, err := os.Stat(filepath.Join(m.Root, applicator))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("applicator: %v %v", st, err)
	}
	if !bytes.Contains(readFile(t, filepath.Join(m.Root, applicator)), []byte("192.168.122.150/24")) {
		t.Error("applicator does not carry the pool address")
	}

	res, err = m.run(nil)
	if err != nil || res.Applied || !res.Updated {
		t.Fatalf("second boot: %+v %v", res, err)
	}
	if after := calls.Subcommands(t); len(after) != len(got) {
		t.Errorf("second boot with an unchanged config ran nmstatectl: %q", after[len(got):])
	}

	rs.cfg = strings.Replace(rs.cfg, "metric: 150", "metric: 90", 1)
	rs.restart()
	res, err = m.run(nil)
	if err != nil || !res.Applied {
		t.Fatalf("changed config: %+v %v", res, err)
	}
	changed := calls.Subcommands(t)[len(got):]
	if count(changed, "apply --no-commit") != 1 || count(changed, "commit") != 1 {
		t.Errorf("changed config nmstatectl calls: %q", changed)
	}
	if !bytes.Contains(readFile(t, filepath.Join(m.Root, "oem/nodereg/network-config.nmstate")), []byte("metric: 90")) {
		t.Error("digested config not updated")
	}
}

// A live apply that fails is rolled back: the previous applicator and state
// stay byte for byte, exit 75.
func TestFailedApplyRollsBack(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	calls := useStubNmstatectl(t)
	m := newMachine(t, "52:54:00:00:11:01", rs.url())
	if _, err := m.run(nil); err != nil {
		t.Fatal(err)
	}
	oldApplicator := readFile(t, filepath.Join(m.Root, applicator))
	oldState := readFile(t, filepath.Join(m.Root, agent.DefaultStatePath))
	before := len(calls.Subcommands(t))

	rs.cfg = strings.Replace(rs.cfg, "metric: 150", "metric: 90", 1)
	rs.restart()
	t.Setenv("NMSTATECTL_STUB_FAIL", "commit")
	_, err := m.run(nil)
	if code := agent.ExitCode(err); code != agent.ExitTempFail {
		t.Fatalf("failed apply: exit %d (%v), want 75", code, err)
	}
	after := calls.Subcommands(t)[before:]
	if count(after, "rollback") != 1 {
		t.Errorf("rollback not called once: %q", after)
	}
	if !bytes.Equal(readFile(t, filepath.Join(m.Root, applicator)), oldApplicator) {
		t.Error("applicator changed by a rolled-back apply")
	}
	// The state gains the error it reports back (docs/annotations.md), nothing else.
	st, _, err := state.Load(host.Root(m.Root), agent.DefaultStatePath)
	if err != nil || st.NetworkErrorKind != "apply-failed" || st.NetworkErrorPhase != string(agent.PhaseApply) {
		t.Errorf("state after a rolled-back apply: %+v %v, want the error kept", st, err)
	}
	var kept []byte
	for _, line := range bytes.SplitAfter(readFile(t, filepath.Join(m.Root, agent.DefaultStatePath)), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("nodereg-network-error")) {
			kept = append(kept, line...)
		}
	}
	if !bytes.Equal(kept, oldState) {
		t.Error("state changed by a rolled-back apply beyond the kept error")
	}
}
