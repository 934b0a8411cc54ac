// Package testbin builds the project's binaries (and test stand-ins) once per
// test process, so black-box tests run the real programs.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// ModuleRoot is the repository root (the directory holding go.mod).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Build compiles the package at pkg (relative to the module root, e.g.
// "./cmd/agent") with the given build tags and returns the binary's path.
func Build(tb testing.TB, pkg string, tags ...string) string {
	tb.Helper()
	p, err := Path(pkg, tags...)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Path is Build for TestMain, where there is no testing.TB yet.
func Path(pkg string, tags ...string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	key := pkg + "|" + strings.Join(tags, ",")
	if p, ok := built[key]; ok {
		return p, nil
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "nodereg-testbin-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	out := filepath.Join(dir, filepath.Base(pkg)+strings.ReplaceAll("-"+strings.Join(tags, "-"), "--", ""))
	args := []string{"build", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = ModuleRoot()
	if len(tags) == 0 {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", pkg, err, b)
	}
	built[key] = out
	return out, nil
}

// NmstatectlStub is the nmstatectl stand-in (tests/stubs/nmstatectl).
func NmstatectlStub(tb testing.TB) string { return Build(tb, "./tests/stubs/nmstatectl") }

// Cleanup removes the binaries; call it from TestMain after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
		built = map[string]string{}
	}
}

// Main is a TestMain for packages that build binaries: it runs the tests,
// removes what Build made and exits with the tests' status.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
