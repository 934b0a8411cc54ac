// Package pkgcheck_test checks the .deb and .rpm `make package` builds
// against `make install`: the same files and links, with the same modes,
// link targets and sizes (the .deb's contents byte for byte), and the man
// page reachable as `man nodereg-agent` in the installed tree. make
// package runs it with -pkg-dir; without one there is nothing to check.
package pkgcheck_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

var pkgDir = flag.String("pkg-dir", "", "make package's output directory (bin/pkg): the packages, root/ (make install's tree) and files.txt")

// entry is one file or link as a listing shows it.
type entry struct {
	mode os.FileMode // permission bits; a link's are not compared
	link string      // a link's target; "" for a file
	size int64       // a file's size
}

func (e entry) String() string {
	if e.link != "" {
		return "-> " + e.link
	}
	return fmt.Sprintf("%04o %d bytes", e.mode, e.size)
}

func needPkgDir(t *testing.T) string {
	t.Helper()
	if *pkgDir == "" {
		t.Skip("no -pkg-dir: `make package` builds the packages and runs this test on them (.ci/run's package stage)")
	}
	return *pkgDir
}

func one(t *testing.T, dir, glob string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one %s in %s, found %v (%v)", glob, dir, m, err)
	}
	return m[0]
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: make package needs it to check the packages (Debian: dpkg, rpm)", name)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	return string(out)
}

// installed is what make install wrote: the list make install-list
// prints, each entry as it is in the install tree.
func installed(t *testing.T, dir string) map[string]entry {
	t.Helper()
	out := run(t, "make", "--no-print-directory", "-s", "-C", testbin.ModuleRoot(), "-f", "systemd/install.mk", "install-list", "BIN=bin")
	want := map[string]entry{}
	for _, p := range strings.Fields(out) {
		full := filepath.Join(dir, "root", p)
		fi, err := os.Lstat(full)
		if err != nil {
			t.Fatalf("make install-list names %s, not in make install's tree: %v", p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(full)
			want[p] = entry{link: target}
			continue
		}
		want[p] = entry{mode: fi.Mode().Perm(), size: fi.Size()}
	}
	if len(want) < 10 {
		t.Fatalf("make install-list names %d files: %v", len(want), want)
	}
	return want
}

// parseListing reads `ls -l`-style lines (dpkg-deb -c, rpm -qlvp): the
// mode first, the path at pathField (".": stripped), "-> target" last.
func parseListing(t *testing.T, out string, sizeField, pathField int) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) <= pathField || f[0][0] == 'd' {
			continue
		}
		p := strings.TrimPrefix(f[pathField], ".")
		if f[0][0] == 'l' {
			if len(f) < pathField+3 || f[pathField+1] != "->" {
				t.Fatalf("a link without its target: %s", l)
			}
			got[p] = entry{link: f[pathField+2]}
			continue
		}
		size, err := strconv.ParseInt(f[sizeField], 10, 64)
		if err != nil {
			t.Fatalf("no size in %q", l)
		}
		got[p] = entry{mode: parseMode(t, f[0]), size: size}
	}
	return got
}

func parseMode(t *testing.T, s string) os.FileMode {
	t.Helper()
	if len(s) != 10 {
		t.Fatalf("mode %q", s)
	}
	var m os.FileMode
	for i, c := range s[1:] {
		if c != '-' {
			m |= 1 << (8 - i)
		}
	}
	return m
}

func compare(t *testing.T, what string, got, want map[string]entry) {
	t.Helper()
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		g, inPkg := got[p]
		w, inInstall := want[p]
		switch {
		case !inPkg:
			t.Errorf("%s lacks %s (make install writes it: %v)", what, p, w)
		case !inInstall:
			t.Errorf("%s holds %s, which make install does not write", what, p)
		case g != w:
			t.Errorf("%s: %s is %v, make install's is %v", what, p, g, w)
		}
	}
}

func TestDebMatchesMakeInstall(t *testing.T) {
	dir := needPkgDir(t)
	deb := one(t, dir, "*.deb")
	want := installed(t, dir)
	compare(t, filepath.Base(deb), parseListing(t, run(t, "dpkg-deb", "-c", deb), 2, 5), want)

	// Installed with dpkg into an empty root of its own (a dpkg database
	// of its own): every file byte for byte as make install wrote it.
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "dpkg", "--root="+root, "--force-not-root", "--force-script-chrootless", "-i", deb)
	for p, e := range want {
		if e.link != "" {
			if got, err := os.Readlink(filepath.Join(root, p)); err != nil || got != e.link {
				t.Errorf("dpkg -i: %s -> %q (%v), want -> %s", p, got, err, e.link)
			}
			continue
		}
		got, err1 := os.ReadFile(filepath.Join(root, p))
		ours, err2 := os.ReadFile(filepath.Join(dir, "root", p))
		if err1 != nil || err2 != nil || !bytes.Equal(got, ours) {
			t.Errorf("dpkg -i: %s differs from make install's (%v %v)", p, err1, err2)
		}
	}
	if out := run(t, "dpkg", "--root="+root, "-s", "nodereg"); !strings.Contains(out, "Status: install ok installed") {
		t.Errorf("dpkg -s nodereg:\n%s", out)
	}
}

func TestRpmMatchesMakeInstall(t *testing.T) {
	dir := needPkgDir(t)
	rpm := one(t, dir, "*.rpm")
	compare(t, filepath.Base(rpm), parseListing(t, run(t, "rpm", "-qlvp", rpm), 4, 8), installed(t, dir))
	if out := run(t, "rpm", "-qp", "--conflicts", rpm); !strings.Contains(out, "elemental-register") {
		t.Errorf("the rpm does not conflict with elemental-register: %q", out)
	}
}

// TestManPageAfterInstall: `man nodereg-agent` finds the page in make
// install's tree, and every command has one.
func TestManPageAfterInstall(t *testing.T) {
	dir := needPkgDir(t)
	manDir := filepath.Join(dir, "root", "usr/share/man")
	if _, err := exec.LookPath("man"); err != nil {
		t.Fatal("man not found: install Debian's man-db to check the man pages")
	}
	cmd := exec.Command("man", "-M", manDir, "-P", "cat", "nodereg-agent")
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "nodereg-agent - nodereg's registration agent") || !strings.Contains(string(out), "--registration-url") {
		t.Fatalf("man nodereg-agent: %v\n%s", err, out)
	}
	for _, sub := range []string{"register", "render", "inventory", "verify", "version"} {
		if _, err := os.Stat(filepath.Join(manDir, "man8", "nodereg-agent-"+sub+".8")); err != nil {
			t.Errorf("no man page for %s: %v", sub, err)
		}
	}
}

var manRef = regexp.MustCompile(`^man:([a-z0-9-]+)\(8\)$`)

// TestUnitsDocumentInstalledManPages: each installed unit's Documentation=
// names man pages, every one installed beside it.
func TestUnitsDocumentInstalledManPages(t *testing.T) {
	dir := needPkgDir(t)
	units, err := filepath.Glob(filepath.Join(dir, "root", "usr/lib/systemd/system", "nodereg*"))
	if err != nil || len(units) < 6 {
		t.Fatalf("installed units %v (%v)", units, err)
	}
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Documentation="); ok {
				refs = append(refs, strings.Fields(v)...)
			}
		}
		if len(refs) == 0 {
			t.Errorf("%s has no Documentation=", filepath.Base(u))
		}
		for _, r := range refs {
			m := manRef.FindStringSubmatch(r)
			if m == nil {
				t.Errorf("%s: Documentation=%s is not an installed man page (man:NAME(8))", filepath.Base(u), r)
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, "root", "usr/share/man/man8", m[1]+".8")); err != nil {
				t.Errorf("%s: Documentation=%s: %v", filepath.Base(u), r, err)
			}
		}
	}
}
