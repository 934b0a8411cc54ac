// Package testbin builds the project's binaries (and test stand-ins) for
// black-box tests, once for a given source tree: every package's test
// process of one `go test ./...` shares what the first one built.
//
// The binaries sit in a cache directory keyed by a hash of the module's
// source (every file but tests, .git and bin/), the Go version and the
// build's environment, so an edit anywhere builds afresh and an unchanged
// tree is never built twice. Processes that want the same binary at once
// take turns on a lock file: one builds, the others use its result.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvCache names the cache directory; without it, nodereg-testbin in the
// user's cache directory (os.UserCacheDir), else in the temp directory.
const EnvCache = "NODEREG_TESTBIN_CACHE"

// staleAfter is how long a source tree's binaries stay unused before a
// later run removes them: longer than any package's tests run (their
// timeouts are minutes), short enough that a day of edits, each a tree of
// its own, does not fill the disk.
const staleAfter = time.Hour

var (
	mu    sync.Mutex
	built = map[string]string{}

	keyOnce sync.Once
	keyDir  string
	keyErr  error
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
	keyOnce.Do(func() { keyDir, keyErr = cacheDir() })
	if keyErr != nil {
		return "", keyErr
	}
	// Every call marks the tree used, so a package whose tests outlast
	// staleAfter (a lab queued on the heavy lock) keeps its binaries from
	// another tree's prune; one pruned all the same is built again.
	now := time.Now()
	_ = os.Chtimes(keyDir, now, now)
	if p, ok := built[key]; ok {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	// One directory per package path: two packages may share a name
	// (tests/boot/elemental and tests/stubs/elemental), and the binary
	// keeps its package's name, which tests put on PATH.
	dir := filepath.Join(keyDir, strings.ReplaceAll(strings.Trim(filepath.Clean(pkg), "./"), "/", "_"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := filepath.Base(pkg)
	if len(tags) > 0 {
		name += "-" + strings.Join(tags, "-")
	}
	out := filepath.Join(dir, name)
	if err := buildOnce(out, pkg, tags); err != nil {
		return "", err
	}
	built[key] = out
	return out, nil
}

// buildOnce builds pkg at out unless another process already has, holding
// out's lock file meanwhile so that a second process waits for the first
// build instead of running one of its own.
func buildOnce(out, pkg string, tags []string) error {
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if fi, err := os.Stat(out); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	// Built under another name and renamed: a killed build leaves no
	// half-written binary at out for the next run to trust.
	tmp := fmt.Sprintf("%s.tmp%d", out, os.Getpid())
	args := []string{"build", "-o", tmp}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = ModuleRoot()
	cmd.Env = buildEnv(tags)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("building %s: %v\n%s", pkg, err, b)
	}
	return os.Rename(tmp, out)
}

// buildEnv is the environment of a build: the default build links
// statically, as make build does; a tagged build (the emulated TPM's)
// keeps the caller's cgo setting.
func buildEnv(tags []string) []string {
	if len(tags) == 0 {
		return append(os.Environ(), "CGO_ENABLED=0")
	}
	return os.Environ()
}

// cacheDir is this source tree's directory in the cache, made if need be
// and marked used now; directories of trees unused for staleAfter go.
func cacheDir() (string, error) {
	root := os.Getenv(EnvCache)
	if root == "" {
		if d, err := os.UserCacheDir(); err == nil {
			root = filepath.Join(d, "nodereg-testbin")
		} else {
			root = filepath.Join(os.TempDir(), "nodereg-testbin")
		}
	}
	key, err := sourceKey(ModuleRoot())
	if err != nil {
		return "", fmt.Errorf("hashing the module's source for the test binaries: %w", err)
	}
	dir := filepath.Join(root, key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	now := time.Now()
	if err := os.Chtimes(dir, now, now); err != nil {
		return "", err
	}
	pruneStale(root, dir, now)
	return dir, nil
}

// pruneStale removes the cache's directories other than keep that no run
// has used for staleAfter. It is tidying only: a failure changes nothing.
func pruneStale(root, keep string, now time.Time) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if !e.IsDir() || p == keep {
			continue
		}
		if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > staleAfter {
			os.RemoveAll(p)
		}
	}
}

// sourceKey hashes what a build of the module reads: every file below
// root but test files, version control and what .gitignore keeps out
// (bin/ and tmp/, test binaries and profiles),
// with the Go version and the environment variables that change a build.
func sourceKey(root string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, v := range []string{"GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED", "CC", "GOAMD64", "GOTOOLCHAIN"} {
		fmt.Fprintf(h, "%s=%s\n", v, os.Getenv(v))
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || rel == "tmp") {
				return filepath.SkipDir
			}
			return nil
		}
		// Prose goes into no binary (nothing embeds a .md file): an edit
		// of the docs mid-run does not rebuild every binary.
		if !d.Type().IsRegular() || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, ".test") || strings.HasSuffix(p, ".out") || strings.HasSuffix(p, ".md") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", rel)
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		_, _ = h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// NmstatectlStub is the nmstatectl stand-in (tests/stubs/nmstatectl).
func NmstatectlStub(tb testing.TB) string { return Build(tb, "./tests/stubs/nmstatectl") }

// Cleanup forgets what this process was handed. The binaries stay in the
// cache for the other packages of the run and the next run of the same
// tree (an unused tree's are removed after staleAfter).
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	built = map[string]string{}
}

// Main is a TestMain for packages that build binaries: it runs the tests
// and exits with their status.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
