// Package testbin builds the project's binaries (and test stand-ins) once per
// test process, so black-box tests run the real programs.
package testbin

import (
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
	mu.Lock()
	defer mu.Unlock()
	key := pkg + "|" + strings.Join(tags, ",")
	if p, ok := built[key]; ok {
		return p
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "nodereg-testbin-")
		if err != nil {
			tb.Fatal(err)
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
		tb.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	built[key] = out
	return out
}

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
