// Package node gives the reliability tests (tests/faults, tests/load,
// tests/lab) a scratch "machine": a root directory with a NIC identity, an
// elemental config, a state file, and the nmstatectl stand-in wired in per
// machine, plus the checks every fault case makes on that root afterwards.
// Only tests import it.
package node

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/apply"
)

// Machine is one node's scratch root.
type Machine struct {
	Root string
	MAC  string
	// StubDir holds the nmstatectl stand-in's call log and checkpoint, kept
	// apart per machine so machines can run in parallel.
	StubDir string
}

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
	nic := filepath.Join(root, "sys/class/net/eth0")
	Must(tb, os.MkdirAll(nic, 0o755))
	Must(tb, os.WriteFile(filepath.Join(nic, "address"), []byte(mac+"\n"), 0o644))
	Must(tb, os.WriteFile(filepath.Join(nic, "addr_assign_type"), []byte("0\n"), 0o644))
	dmi := filepath.Join(root, "sys/class/dmi/id")
	Must(tb, os.MkdirAll(dmi, 0o755))
	uuid := "00000000-0000-4000-8000-" + strings.ReplaceAll(mac, ":", "")
	Must(tb, os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte(uuid+"\n"), 0o644))
	m.WriteConfig("elemental:\n  registration:\n    url: " + url + "\n    auth: mac\n" + extra)
	return m
}

// WriteConfig replaces the elemental config file.
func (m *Machine) WriteConfig(text string) {
	p := filepath.Join(m.Root, ConfigPath)
	_ = os.MkdirAll(filepath.Dir(p), 0o700)
	_ = os.WriteFile(p, []byte(text), 0o600)
}

// WriteState puts a state file in place, as a previous run would have.
func (m *Machine) WriteState(tb testing.TB, text string) {
	tb.Helper()
	p := filepath.Join(m.Root, StatePath)
	Must(tb, os.MkdirAll(filepath.Dir(p), 0o700))
	Must(tb, os.WriteFile(p, []byte(text), 0o600))
}

// Runner runs the real programs with this machine's stand-in environment.
func (m *Machine) Runner() apply.Runner {
	return StubRunner{Env: []string{
		"NMSTATECTL_STUB_LOG=" + filepath.Join(m.StubDir, "calls.jsonl"),
		"NMSTATECTL_STUB_STATE=" + filepath.Join(m.StubDir, "checkpoint"),
	}}
}

// StubRunner is apply.ExecRunner with extra environment per machine.
type StubRunner struct{ Env []string }

// Run implements apply.Runner.
func (r StubRunner) Run(ctx context.Context, c apply.Command) ([]byte, error) {
	c.Env = append(append([]string{}, c.Env...), r.Env...)
	return apply.ExecRunner{}.Run(ctx, c)
}

// Files returns every regular file under root (relative path -> content).
func Files(tb testing.TB, root string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = b
		return nil
	})
	Must(tb, err)
	return out
}

// Leftovers lists files that look half-written: temporary files of the
// atomic writers (".nodereg-*.tmp", "*.tmp", "*~") anywhere under root.
func Leftovers(files map[string][]byte) []string {
	var out []string
	for p := range files {
		base := filepath.Base(p)
		if strings.HasSuffix(base, ".tmp") || strings.HasPrefix(base, ".nodereg-") || strings.HasSuffix(base, "~") || strings.Contains(base, ".tmp-") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Changed lists paths whose content differs between two snapshots (added,
// removed or modified).
func Changed(before, after map[string][]byte) []string {
	var out []string
	for p, b := range before {
		if a, ok := after[p]; !ok || !bytes.Equal(a, b) {
			out = append(out, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Log is a logrus entry writing into a buffer that is safe to read while
// the run goes on.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Entry is a debug-level logger into l.
func (l *Log) Entry() *logrus.Entry {
	lg := logrus.New()
	lg.Out = l
	lg.Level = logrus.DebugLevel
	return logrus.NewEntry(lg)
}

// Must fails tb on err.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
