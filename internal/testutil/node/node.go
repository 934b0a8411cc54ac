// Package node gives the reliability tests (tests/faults, tests/load,
// tests/lab) a scratch "machine": a root directory with a NIC identity, an
// elemental config, a state file, and the nmstatectl stand-in wired in per
// machine, plus the checks every fault case makes on that root afterwards.
// Only tests import it.
package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

// Machine is one node's scratch root.
type Machine struct {
	Root string
	MAC  string
	// StubDir holds the nmstatectl stand-in's call log and checkpoint, kept
	// apart per machine so machines can run in parallel.
	StubDir string
}

// NIC is the one network interface a machine has, carrying its MAC. It is
// the interface the shared templates (NmstateTemplate, AddressOnlyTemplate)
// configure: the real nmstatectl refuses to apply to an interface the
// machine lacks, so a template naming another would fail on a real node.
const NIC = "enp1s0"

// ConfigPath and StatePath are the agent's defaults under Root.
const (
	ConfigPath = "oem/registration/config.yaml"
	StatePath  = "oem/registration/state.yaml"
)

// New makes a machine whose MAC identifies it (auth: mac) and whose config
// points at url; extra is appended under elemental.registration (indented
// four spaces).
func New(tb testing.TB, mac, url, extra string) *Machine {
	tb.Helper()
	root := tb.TempDir()
	m := &Machine{Root: root, MAC: mac, StubDir: tb.TempDir()}
	nic := host.Root(root).Path("/sys/class/net/" + NIC)
	Must(tb, os.MkdirAll(nic, 0o755))
	Must(tb, os.WriteFile(filepath.Join(nic, "address"), []byte(mac+"\n"), 0o644))
	Must(tb, os.WriteFile(filepath.Join(nic, "addr_assign_type"), []byte("0\n"), 0o644))
	dmi := host.Root(root).Path("/sys/class/dmi/id")
	Must(tb, os.MkdirAll(dmi, 0o755))
	uuid := "00000000-0000-4000-8000-" + strings.ReplaceAll(mac, ":", "")
	Must(tb, os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte(uuid+"\n"), 0o644))
	m.WriteConfig("elemental:\n  registration:\n    url: " + url + "\n    auth: mac\n" + extra)
	return m
}

// WriteConfig replaces the elemental config file.
func (m *Machine) WriteConfig(text string) {
	p := host.Root(m.Root).Path(ConfigPath)
	_ = os.MkdirAll(filepath.Dir(p), 0o700)
	_ = os.WriteFile(p, []byte(text), 0o600)
}

// WriteState puts a state file in place, as a previous run would have.
func (m *Machine) WriteState(tb testing.TB, text string) {
	tb.Helper()
	p := host.Root(m.Root).Path(StatePath)
	Must(tb, os.MkdirAll(filepath.Dir(p), 0o700))
	Must(tb, os.WriteFile(p, []byte(text), 0o600))
}

// Stub is this machine's nmstatectl stand-in: its call log, its checkpoint,
// and the machine's interfaces, so it refuses what the real tool would.
func (m *Machine) Stub() testutil.Stub {
	return testutil.Stub{Log: filepath.Join(m.StubDir, "calls.jsonl"), State: filepath.Join(m.StubDir, "checkpoint"),
		Interfaces: m.Interfaces()}
}

// Interfaces are the machine's network interfaces, as its /sys/class/net
// lists them now (a test may have added some).
func (m *Machine) Interfaces() []string {
	entries, _ := os.ReadDir(host.Root(m.Root).Path("/sys/class/net"))
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Runner runs the real programs with this machine's stand-in environment.
func (m *Machine) Runner() host.Runner { return StubRunner{Env: m.Stub().Env()} }

// StubRunner is host.ExecRunner with extra environment per machine.
type StubRunner struct{ Env []string }

// Run implements host.Runner.
func (r StubRunner) Run(ctx context.Context, c host.Command) ([]byte, error) {
	c.Env = append(append([]string{}, c.Env...), r.Env...)
	return host.ExecRunner{}.Run(ctx, c)
}

// The generic helpers, under the names the reliability tests use.
var (
	Must      = testutil.Must
	Files     = testutil.Files
	Leftovers = testutil.Leftovers
	Changed   = testutil.Changed
)

// Log is a writer into a buffer that is safe to read while the run goes on.
type Log = testutil.Log
