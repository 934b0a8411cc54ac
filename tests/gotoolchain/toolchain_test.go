// Package gotoolchain_test runs .ci/go-toolchain.sh, the step that brings
// the Go go.mod names to a machine whose Go is too old or missing (Debian
// 12's 1.19 has no GOTOOLCHAIN), against a module proxy on the local disk
// (GOPROXY=file://...), so it runs offline: a toolchain module zip of a
// made-up Go (a bin/go that reports its version), the proxy's .info/.mod
// files and a checksum database record for the curl path.
package gotoolchain_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

const mod = "golang.org/toolchain"

// fakeGo is a go command that knows only its version.
func fakeGo(v string) string {
	return "#!/bin/sh\ncase \"$*\" in\n\"env GOVERSION\") echo go" + v + " ;;\nversion) echo \"go version go" + v + " " + runtime.GOOS + "/" + runtime.GOARCH + "\" ;;\n*) exit 2 ;;\nesac\n"
}

func modVersion(v string) string {
	return "v0.0.1-go" + v + "." + runtime.GOOS + "-" + runtime.GOARCH
}

// proxy writes a file:// module proxy holding the toolchain module of Go v
// and, unless badSum, the checksum database line for its zip. It returns
// the GOPROXY value.
func proxy(t *testing.T, v string, badSum bool) string {
	t.Helper()
	root := t.TempDir()
	mv := modVersion(v)
	at := filepath.Join(root, mod, "@v")
	must(t, os.MkdirAll(at, 0o755))
	files := map[string]string{
		"bin/go":                 fakeGo(v),
		"bin/gofmt":              "#!/bin/sh\nexit 0\n",
		"pkg/tool/x/compile":     "#!/bin/sh\nexit 0\n",
		"go.env":                 "GOTOOLCHAIN=auto\n",
		"VERSION":                "go" + v + "\n",
		"src/builtin/builtin.go": "package builtin\n",
	}
	var names []string
	for n := range files {
		names = append(names, mod+"@"+mv+"/"+n)
	}
	sort.Strings(names)
	zf, err := os.Create(filepath.Join(at, mv+".zip"))
	must(t, err)
	zw := zip.NewWriter(zf)
	// dirhash.Hash1 (golang.org/x/mod): sha256 of "<hex>  <name>\n" lines.
	sum := sha256.New()
	for _, n := range names {
		body := files[strings.TrimPrefix(n, mod+"@"+mv+"/")]
		w, err := zw.Create(n)
		must(t, err)
		_, err = w.Write([]byte(body))
		must(t, err)
		fmt.Fprintf(sum, "%x  %s\n", sha256.Sum256([]byte(body)), n)
	}
	must(t, zw.Close())
	must(t, zf.Close())
	h1 := "h1:" + base64.StdEncoding.EncodeToString(sum.Sum(nil))
	if badSum {
		h1 = "h1:" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	}
	must(t, os.WriteFile(filepath.Join(at, mv+".info"), []byte(`{"Version":"`+mv+`"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(at, mv+".mod"), []byte("module "+mod+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(at, "list"), []byte(mv+"\n"), 0o644))
	lookup := filepath.Join(root, "sumdb", "sum.golang.org", "lookup")
	must(t, os.MkdirAll(filepath.Join(lookup, mod), 0o755))
	must(t, os.WriteFile(filepath.Join(lookup, mod+"@"+mv), []byte("1\n"+mod+" "+mv+" "+h1+"\n"+mod+" "+mv+"/go.mod h1:x\n\ngo.sum database tree\n"), 0o644))
	return "file://" + root
}

// tree is a copy of the script beside a go.mod with the given go lines.
func tree(t *testing.T, gomod string) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, ".ci"), 0o755))
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), ".ci", "go-toolchain.sh"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, ".ci", "go-toolchain.sh"), b, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\n"+gomod), 0o644))
	return dir
}

// tools is a PATH directory with the commands the script uses and no go,
// whatever the host has in /usr/bin; extra names are added as symlinks.
func tools(t *testing.T, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"bash", "sh", "env", "sed", "awk", "grep", "head", "cut", "tr", "sort", "find", "xargs",
		"sha256sum", "base64", "curl", "unzip", "mktemp", "mkdir", "mv", "cp", "rm", "chmod", "readlink",
		"dirname", "uname", "cat"} {
		p, err := exec.LookPath(n)
		if err != nil {
			// As the swtpm tests do without swtpm: a visible skip naming
			// the package (.ci/run installs curl and unzip).
			t.Skipf("%s not installed (apt-get install curl unzip): the script's no-go path needs it", n)
		}
		must(t, os.Symlink(p, filepath.Join(dir, n)))
	}
	for n, target := range extra {
		must(t, os.Symlink(target, filepath.Join(dir, n)))
	}
	return dir
}

type run struct {
	stdout, stderr string
	err            error
}

func script(t *testing.T, dir, path string, env ...string) run {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, ".ci", "go-toolchain.sh"))
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir(), "NODEREG_GO_DIR=" + filepath.Join(t.TempDir(), "tc")}, env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	return run{o.String(), e.String(), err}
}

// reports runs the go in bin and checks its version.
func reports(t *testing.T, bin, want string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "go"), "env", "GOVERSION").Output()
	if err != nil || strings.TrimSpace(string(out)) != "go"+want {
		t.Fatalf("%s/go env GOVERSION = %q, %v; want go%s", bin, out, err, want)
	}
}

func TestNoGoFetchesWithCurlAndChecksTheSum(t *testing.T) {
	dir := tree(t, "go 1.99\n")
	r := script(t, dir, tools(t, nil), "GOPROXY="+proxy(t, "1.99.0", false))
	if r.err != nil {
		t.Fatalf("script failed: %v\n%s", r.err, r.stderr)
	}
	// "go 1.99" is a language version: its first release, as cmd/go reads it.
	bin := strings.TrimSpace(r.stdout)
	if !strings.HasSuffix(bin, "/go1.99.0."+runtime.GOOS+"-"+runtime.GOARCH+"/bin") {
		t.Fatalf("stdout %q: want the bin dir of go1.99.0", r.stdout)
	}
	reports(t, bin, "1.99.0")
	if fi, err := os.Stat(filepath.Join(bin, "..", "pkg", "tool", "x", "compile")); err != nil || fi.Mode()&0o100 == 0 {
		t.Fatalf("pkg/tool command not executable after unpacking: %v %v", fi, err)
	}
}

func TestToolchainLineWinsAndSecondRunFetchesNothing(t *testing.T) {
	dir := tree(t, "go 1.98\n\ntoolchain go1.99.3\n")
	path := tools(t, nil)
	home := t.TempDir()
	r := script(t, dir, path, "GOPROXY="+proxy(t, "1.99.3", false), "NODEREG_GO_DIR="+home)
	if r.err != nil {
		t.Fatalf("script failed: %v\n%s", r.err, r.stderr)
	}
	reports(t, strings.TrimSpace(r.stdout), "1.99.3")
	// GOPROXY=off: a second run must find the unpacked Go, not fetch.
	r2 := script(t, dir, path, "GOPROXY=off", "NODEREG_GO_DIR="+home)
	if r2.err != nil || r2.stdout != r.stdout {
		t.Fatalf("second run: %v, stdout %q (first %q)\n%s", r2.err, r2.stdout, r.stdout, r2.stderr)
	}
}

func TestSumMismatchFailsWithOneLine(t *testing.T) {
	dir := tree(t, "go 1.99.0\n")
	r := script(t, dir, tools(t, nil), "GOPROXY="+proxy(t, "1.99.0", true))
	if r.err == nil {
		t.Fatalf("script accepted a zip whose hash is not the checksum database's: %s", r.stdout)
	}
	last := lastLine(r.stderr)
	if !strings.Contains(last, "does not match the checksum database") || r.stdout != "" {
		t.Fatalf("stderr %q, stdout %q: want one line naming the checksum mismatch and no bin dir", r.stderr, r.stdout)
	}
}

func TestMissingVersionFailsEarly(t *testing.T) {
	dir := tree(t, "go 1.99.7\n")
	r := script(t, dir, tools(t, nil), "GOPROXY="+proxy(t, "1.99.0", false))
	if r.err == nil || r.stdout != "" {
		t.Fatalf("script succeeded without the toolchain in the proxy: %q", r.stdout)
	}
	if last := lastLine(r.stderr); !strings.Contains(last, "could not fetch") || !strings.Contains(last, modVersion("1.99.7")) {
		t.Fatalf("last stderr line %q: want it to name the module version it could not fetch", last)
	}
}

func TestNewEnoughGoOnPathIsUsed(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "go")
	must(t, os.WriteFile(fake, []byte(fakeGo("1.99.5")), 0o755))
	dir := tree(t, "go 1.99.2\n")
	r := script(t, dir, tools(t, map[string]string{"go": fake}), "GOPROXY=off")
	if r.err != nil {
		t.Fatalf("script failed: %v\n%s", r.err, r.stderr)
	}
	if got := strings.TrimSpace(r.stdout); got != filepath.Dir(fake) {
		t.Fatalf("stdout %q: want the dir of the go on PATH, %s", got, filepath.Dir(fake))
	}
}

// An older real go (the one running this test is older than the made-up
// 1.99.x) downloads the module from the file proxy with `go mod download`.
func TestOlderGoDownloadsTheModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go on PATH to play the older go: %v", err)
	}
	dir := tree(t, "go 1.99.4\n")
	cache := t.TempDir()
	r := script(t, dir, tools(t, map[string]string{"go": goBin}), "GOPROXY="+proxy(t, "1.99.4", false),
		"GOSUMDB=off", "GOMODCACHE="+cache, "GOCACHE="+t.TempDir(), "GOFLAGS=-modcacherw")
	if r.err != nil {
		t.Fatalf("script failed: %v\n%s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "go mod download "+mod+"@"+modVersion("1.99.4")) {
		t.Fatalf("stderr %q: want the go mod download path", r.stderr)
	}
	reports(t, strings.TrimSpace(r.stdout), "1.99.4")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
