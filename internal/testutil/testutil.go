// Package testutil is the one set of test helpers shared by unit tests
// (apply, agent) and end-to-end tests (tests/...): failing on an error, a
// logger into the test log, snapshots of a scratch root, and the
// nmstatectl stand-in's call log. It imports nothing of nodereg, so every
// package's tests can use it. Only tests import it.
package testutil

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
)

// WriteFile writes text at p below root, making the directories on the way
// (0755), with exactly perm whatever the umask: the scratch files tests
// lay out for the code under test to read.
func WriteFile(tb testing.TB, root, p, text string, perm os.FileMode) {
	tb.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	Must(tb, os.MkdirAll(filepath.Dir(full), 0o755))
	Must(tb, os.WriteFile(full, []byte(text), perm))
	Must(tb, os.Chmod(full, perm))
}

// Run runs cmd with its output captured and returns its exit code and what
// it wrote to stdout and stderr; a program that cannot be started fails tb.
func Run(tb testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// Must fails tb on err.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// Files returns every regular file under root (relative path -> content).
func Files(tb testing.TB, root string) map[string][]byte {
	tb.Helper()
	out, err := ReadFiles(root)
	Must(tb, err)
	return out
}

// ReadFiles is Files for goroutines other than the test's, which must not
// call t.Fatal.
func ReadFiles(root string) (map[string][]byte, error) {
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
	return out, err
}

// Tree lists every entry under root (directories too) with its mode and,
// for regular files, a content hash: "byte-identical" compares names, modes
// and bytes.
func Tree(tb testing.TB, root string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = v
		return nil
	})
	Must(tb, err)
	return out
}

// TreeDiff says how two Trees differ, one line per path; "" when equal.
func TreeDiff(before, after map[string]string) string {
	var lines []string
	for p, b := range before {
		if a, ok := after[p]; !ok {
			lines = append(lines, "removed "+p)
		} else if a != b {
			lines = append(lines, fmt.Sprintf("changed %s: %s -> %s", p, b, a))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			lines = append(lines, "added "+p)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
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
	slices.Sort(out)
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
	slices.Sort(out)
	return out
}

// Log is a writer into a buffer that is safe to read while the run goes on.
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

// TestLog is a debug-level logger into tb's log.
func TestLog(tb testing.TB) *logrus.Entry {
	l := logrus.New()
	l.Out = testWriter{tb}
	l.Level = logrus.DebugLevel
	return logrus.NewEntry(l)
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Stub is one nmstatectl stand-in's private files: its call log and its
// checkpoint, so stand-ins of parallel tests never share them.
type Stub struct {
	Log, State string
	// Interfaces are the machine's interfaces: the real nmstatectl refuses
	// to apply to any other (transcript 12). Nil tells the stand-in
	// nothing, and it then looks the name up among the kernel's links in
	// its network namespace (tests/stubs/nmstatectl offline.go).
	Interfaces []string
}

// NewStub places a stand-in's files in a fresh temp directory.
func NewStub(tb testing.TB) Stub {
	d := tb.TempDir()
	return Stub{Log: filepath.Join(d, "calls.jsonl"), State: filepath.Join(d, "checkpoint")}
}

// Env is the environment that points the stand-in at s.
func (s Stub) Env() []string {
	env := []string{"NMSTATECTL_STUB_LOG=" + s.Log, "NMSTATECTL_STUB_STATE=" + s.State}
	if s.Interfaces != nil {
		env = append(env, "NMSTATECTL_STUB_INTERFACES="+strings.Join(s.Interfaces, ","))
	}
	return env
}

// StubCall is one logged call of the stand-in.
type StubCall struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
}

// Calls reads the stand-in's call log, in call order; no log: no calls.
func (s Stub) Calls(tb testing.TB) []StubCall {
	tb.Helper()
	return JSONLines[StubCall](tb, s.Log)
}

// JSONLines reads a log of one JSON value a line (a stand-in's calls, the
// crash recorder's operations), in order; a missing file is an empty log.
// A line that does not decode as T fails tb.
func JSONLines[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	Must(tb, err)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out = append(out, v)
	}
	Must(tb, sc.Err())
	return out
}

// Subcommands are the calls' arguments joined by spaces ("gc -",
// "apply --no-commit ...").
func (s Stub) Subcommands(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, c := range s.Calls(tb) {
		out = append(out, strings.Join(c.Args, " "))
	}
	return out
}

// Concurrently calls f(0) … f(n-1), each on a goroutine of its own, all
// at once, and returns the errors they returned, in no particular order.
func Concurrently(n int, f func(i int) error) []error {
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
