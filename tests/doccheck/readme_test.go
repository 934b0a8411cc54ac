package doccheck_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// quickStart are the README's runnable lines, in the README's order, and
// what each must print (every want is quoted from the README, so the page
// and the check move together).
var quickStart = []struct {
	line string
	want []string
}{
	{"make build", nil},
	{"bin/nodereg-agent version", nil},
	{rancherRender, []string{"address0=192.168.122.150/24"}},
	{rancherSeedBoot, []string{"{boot-ip}: first try 192.168.122.53 from range\n192.168.122.50-192.168.122.59, probed on eth0 before use"}},
}

func init() {
	for _, c := range quickStart {
		runHere[c.line] = true
	}
}

// freshClone copies what a clone of this checkout holds (the files git
// tracks, and those it would track: no bin/, no build output) into a
// temp dir.
func freshClone(t *testing.T) string {
	t.Helper()
	root := testbin.ModuleRoot()
	cmd := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v (the README's commands are checked on a copy of the checkout)", root, err)
	}
	dst := filepath.Join(t.TempDir(), "nodereg")
	n := 0
	for _, p := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, p)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not committed yet
		}
		node.Must(t, err)
		target := filepath.Join(dst, p)
		node.Must(t, os.MkdirAll(filepath.Dir(target), 0o755))
		if fi.Mode()&os.ModeSymlink != 0 {
			link, err := os.Readlink(src)
			node.Must(t, err)
			node.Must(t, os.Symlink(link, target))
			continue
		}
		b, err := os.ReadFile(src)
		node.Must(t, err)
		node.Must(t, os.WriteFile(target, b, fi.Mode().Perm()))
		n++
	}
	if n < 100 {
		t.Fatalf("a clone of %d files: git ls-files lists too little", n)
	}
	return dst
}

// TestReadmeQuickStartOnAFreshClone runs the README's runnable command
// lines, as written and in order, in a copy of the checkout with nothing
// built (make build included), and checks what the README says they
// print. The README's other lines run on the node or in the cluster:
// notRun lists each with the reason.
func TestReadmeQuickStartOnAFreshClone(t *testing.T) {
	for _, c := range quickStart {
		doc(t, "README.md", c.line)
	}
	dir := freshClone(t)
	for _, c := range quickStart {
		cmd := exec.Command("bash", "-c", c.line)
		cmd.Dir = dir
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("README, on a fresh clone: %s: %v\n%s%s", c.line, err, o.String(), e.String())
		}
		if o.Len() == 0 && c.line != "make build" {
			t.Errorf("README: %s prints nothing", c.line)
		}
		for _, w := range c.want {
			doc(t, "README.md", w)
			if !strings.Contains(o.String(), strings.ReplaceAll(w, "\n", " ")) {
				t.Errorf("README: %s does not print %q:\n%s", c.line, w, o.String())
			}
		}
	}
	// The binary is called what the README calls it, and says so.
	out, _ := exec.Command(filepath.Join(dir, "bin", "nodereg-agent"), "nosuch").CombinedOutput()
	if !strings.HasPrefix(string(out), "nodereg-agent: unknown command") {
		t.Errorf("bin/nodereg-agent nosuch: %q, want it to name itself nodereg-agent", out)
	}
}

// TestReadmeIsAGuide: the README stays a guide (at most 300 lines), in the
// order an operator needs it, and every page of docs/ is in the index.
func TestReadmeIsAGuide(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), "README.md"))
	node.Must(t, err)
	if n := bytes.Count(b, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines: move reference into docs/ (docs/README.md indexes it)", n)
	}
	last := -1
	for _, h := range []string{"## Quick start", "## What is proven where", "## Packages and installing", "## Exit codes", "## Developer set-up", "## Layout"} {
		i := bytes.Index(b, []byte("\n"+h))
		if i < 0 || i < last {
			t.Errorf("README.md: %q missing or out of order", h)
		}
		last = i
	}
	index, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), "docs", "README.md"))
	node.Must(t, err)
	pages, err := filepath.Glob(filepath.Join(testbin.ModuleRoot(), "docs", "*.md"))
	node.Must(t, err)
	for _, p := range pages {
		if name := filepath.Base(p); name != "README.md" && !bytes.Contains(index, []byte("]("+name+")")) {
			t.Errorf("docs/README.md does not index %s", name)
		}
	}
}

var (
	// otherName is the binary under a name other than nodereg-agent: the
	// build's old bin/agent, or `agent CMD` as a command.
	otherName = regexp.MustCompile("bin/agent\\b|`agent (render|verify|inventory|version|help|completion|register|--)|'agent --help'")
	// issueNumber is a tracker reference, which means nothing to a reader.
	issueNumber = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)
)

// TestDocsNameOneBinary: every page calls the binary nodereg-agent, the
// name make build and the packages give it and its messages use, and no
// page cites an issue number.
func TestDocsNameOneBinary(t *testing.T) {
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		node.Must(t, err)
		rel, _ := filepath.Rel(testbin.ModuleRoot(), f)
		for _, m := range otherName.FindAllString(string(b), -1) {
			t.Errorf("%s: %q: the binary is nodereg-agent (bin/nodereg-agent in a checkout)", rel, m)
		}
		for _, m := range issueNumber.FindAllString(string(b), -1) {
			t.Errorf("%s: %q: say what changed, not which issue asked", rel, m)
		}
	}
}

// TestOneListOfUnits: every page that says which units to enable gives
// the same list, docs/install.md's, and it is exactly the units whose
// [Install] a plain install enables on an installed system (all but the
// live ISO's nodereg-install.service).
func TestOneListOfUnits(t *testing.T) {
	want := doc(t, "docs/install.md", "systemctl enable nodereg.service nodereg-update.timer nodereg-verify.service")
	n := 0
	for _, f := range docFiles(t) {
		for _, l := range shLines(t, f) {
			if strings.HasPrefix(l, "systemctl enable") {
				n++
				if l != want {
					t.Errorf("%s: `%s`, the list is `%s` (docs/install.md)", filepath.Base(f), l, want)
				}
			}
		}
	}
	if n < 2 {
		t.Errorf("%d pages give the units to enable: the README and docs/install.md should", n)
	}
	units, err := filepath.Glob(filepath.Join(testbin.ModuleRoot(), "systemd", "nodereg*"))
	node.Must(t, err)
	var installed []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		node.Must(t, err)
		if name := filepath.Base(u); bytes.Contains(b, []byte("\n[Install]")) && name != "nodereg-install.service" {
			installed = append(installed, name)
		}
	}
	listed := strings.Fields(strings.TrimPrefix(want, "systemctl enable "))
	slices.Sort(listed)
	if !slices.Equal(installed, listed) {
		t.Errorf("the units with [Install] (installed systems): %v, the docs list %v", installed, listed)
	}
}
