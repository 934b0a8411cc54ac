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
	root := dpkgRoot(t)
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

// upstreamDeb builds a stand-in for upstream's elemental-register package
// with dpkg-deb: it owns /usr/sbin/elemental-register (a script, not a
// link) and a doc file of its own.
func upstreamDeb(t *testing.T) string {
	t.Helper()
	pkg := filepath.Join(t.TempDir(), "elemental-register")
	files := map[string]string{
		"DEBIAN/control": "Package: elemental-register\nVersion: 1.7.1-1\nArchitecture: amd64\n" +
			"Maintainer: nodereg tests <t@example.invalid>\nDescription: stand-in for upstream's elemental-register package\n",
		"usr/sbin/elemental-register":             "#!/bin/sh\necho upstream\n",
		"usr/share/doc/elemental-register/README": "upstream's\n",
	}
	for p, content := range files {
		full := filepath.Join(pkg, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deb := pkg + ".deb"
	run(t, "dpkg-deb", "--root-owner-group", "--build", pkg, deb)
	return deb
}

// dpkgRoot is an empty root with a dpkg database of its own.
func dpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestDebReplacesElementalRegister: the .deb installed with dpkg over a
// package that owns /usr/sbin/elemental-register takes its place in one
// step, as Conflicts, Replaces and Provides promise: upstream's package is
// removed (its files with it), the path is nodereg's link to
// nodereg-agent, dpkg records nodereg as its owner, and nodereg provides
// elemental-register for whatever depends on it.
func TestDebReplacesElementalRegister(t *testing.T) {
	dir := needPkgDir(t)
	deb := one(t, dir, "*.deb")
	root := dpkgRoot(t)
	dpkg := []string{"--root=" + root, "--force-not-root", "--force-script-chrootless"}
	run(t, "dpkg", append(dpkg, "-i", upstreamDeb(t))...)
	if out := run(t, "dpkg", "--root="+root, "-S", "/usr/sbin/elemental-register"); !strings.HasPrefix(out, "elemental-register:") {
		t.Fatalf("the stand-in does not own /usr/sbin/elemental-register: %q", out)
	}
	out := run(t, "dpkg", append(dpkg, "-i", deb)...)
	t.Logf("dpkg -i %s:\n%s", filepath.Base(deb), out)

	if got, err := os.Readlink(filepath.Join(root, "usr/sbin/elemental-register")); err != nil || got != "nodereg-agent" {
		t.Errorf("/usr/sbin/elemental-register -> %q (%v), want nodereg's link to nodereg-agent", got, err)
	}
	if out := run(t, "dpkg", "--root="+root, "-S", "/usr/sbin/elemental-register"); !strings.HasPrefix(out, "nodereg:") {
		t.Errorf("dpkg -S /usr/sbin/elemental-register: %q, want nodereg", out)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/share/doc/elemental-register/README")); !os.IsNotExist(err) {
		t.Errorf("upstream's own files are left behind (%v): its package was not removed", err)
	}
	status := run(t, "dpkg-query", "--root="+root, "-W", "-f", "${Package} ${db:Status-Abbrev}\n")
	if !regexp.MustCompile(`(?m)^nodereg ii`).MatchString(status) || regexp.MustCompile(`(?m)^elemental-register [ih]i`).MatchString(status) {
		t.Errorf("after the install, want nodereg installed and elemental-register not:\n%s", status)
	}
	fields := run(t, "dpkg", "--root="+root, "-s", "nodereg")
	for _, want := range []string{"Provides: elemental-register", "Conflicts: elemental-register", "Replaces: elemental-register"} {
		if !strings.Contains(fields, want) {
			t.Errorf("dpkg -s nodereg has no %q:\n%s", want, fields)
		}
	}
}

// TestPackageFields: what a distribution reads before the files: a
// maintainer with a real address (not localhost), a homepage, the whole
// summary, and in the RPM the licence and docs marked as such and the
// relations of elemental-register (Provides, Conflicts, Obsoletes).
func TestPackageFields(t *testing.T) {
	dir := needPkgDir(t)
	deb, rpm := one(t, dir, "*.deb"), one(t, dir, "*.rpm")
	const summary = "Elemental node registration agent, a drop-in for elemental-register"
	for field, want := range map[string]string{"Maintainer": "<", "Homepage": "https://", "Description": summary} {
		got := strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, field))
		if !strings.Contains(got, want) || strings.Contains(got, "localhost") {
			t.Errorf("deb %s: %q", field, got)
		}
	}
	q := strings.Split(run(t, "rpm", "-qp", "--qf", "%{SUMMARY}\n%{URL}\n%{PACKAGER}\n%{LICENSE}\n", rpm), "\n")
	if len(q) < 4 || q[0] != summary || !strings.HasPrefix(q[1], "https://") || !strings.Contains(q[2], "<") || strings.Contains(q[2], "localhost") || q[3] != "Apache-2.0" {
		t.Errorf("rpm summary, URL, packager, licence: %q", q)
	}
	for flag, want := range map[string]string{
		"--provides": "elemental-register", "--conflicts": "elemental-register", "--obsoletes": "elemental-register",
		"--licensefiles": "/usr/share/doc/nodereg/LICENSE", "--docfiles": "/usr/share/doc/nodereg/README.md",
	} {
		if out := run(t, "rpm", "-qp", flag, rpm); !strings.Contains(out, want) {
			t.Errorf("rpm -qp %s: %q, want %s", flag, out, want)
		}
	}
	if out := run(t, "rpm", "-qp", "--docfiles", rpm); strings.Contains(out, "/usr/sbin/") {
		t.Errorf("rpm --docfiles lists a program: %q", out)
	}
}
