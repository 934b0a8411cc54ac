// Package edge checks that the agent reaches the machine only through
// internal/host (docs/architecture.md, "Where side effects live"): no
// package linked into the agent binary, other than the edge itself, calls
// an os function that touches the file system, imports os/exec, walks a
// tree with path/filepath, or calls the file functions of the packages the
// edge is built from. Nor may it go around the edge it is handed: build a
// root of its own (host.Root, the one FS being agent.newEnv's), re-root a
// path --root already joined (host.Root("")), default a nil FS to the live
// root, or read the kernel's interface table outside internal/nic. A
// scratch --root, a dry run and the tests then see every read, write and
// program run the agent makes.
package edge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/nodereg/nodereg"

// edge are the packages the edge is made of: internal/host and the parts
// it is built from, which hold the file system's calls on its behalf.
var edge = []string{
	"internal/host",
	"internal/safefile",   // reads without following a planted link, bounded
	"internal/atomicfile", // temp file, fsync, rename; stale temp removal
	"internal/statelock",  // the inter-process lock file
}

// exceptions are the calls allowed outside the edge, each with its reason
// (at most three, and each must still be there: a stale entry fails).
var exceptions = map[string]string{}

// fileFuncs are the os functions that reach the file system (or a
// process's files) by name.
var fileFuncs = map[string]map[string]bool{
	"os": set("Open", "OpenFile", "Create", "CreateTemp", "ReadFile", "WriteFile", "ReadDir",
		"Readlink", "Stat", "Lstat", "Mkdir", "MkdirAll", "MkdirTemp", "Remove", "RemoveAll",
		"Rename", "Link", "Symlink", "Chmod", "Chown", "Lchown", "Chtimes", "Truncate", "DirFS",
		"CopyFS", "OpenRoot", "OpenInRoot", "Chdir", "NewFile", "SameFile"),
	"path/filepath": set("Walk", "WalkDir", "Glob", "EvalSymlinks"),
	// The parts of the edge: their pure helpers (CheckPEM, Kind, IsTemp,
	// the error values) may be used anywhere, their file calls only
	// through internal/host.
	module + "/internal/safefile":   set("Open", "OpenAs", "ReadFile", "ReadPEM", "SetAside"),
	module + "/internal/atomicfile": set("Write", "Remove", "RemoveStale", "SyncDir"),
	module + "/internal/statelock":  set("Acquire"),
}

// forbiddenImports may not be imported at all outside the edge.
var forbiddenImports = set("os/exec")

// rootMakers are the functions, by package, that may build a host.Root:
// the run's one FS is made in agent.newEnv; everything else is handed it.
var rootMakers = map[string]string{"agent": "newEnv"}

// nicFuncs are the net functions that read the kernel's interface table,
// which internal/nic alone reads (the live system's, whatever --root is).
var nicFuncs = set("Interfaces", "InterfaceByName", "InterfaceByIndex", "InterfaceAddrs")

// nicPackage may call them.
const nicPackage = "internal/nic"

// pathTable is the one table of host paths: no other file of the agent's
// packages names one (a string that starts with a top directory of the host
// and names something in it).
const pathTable = "internal/host/paths.go"

// hostPath is a string naming a host path: /etc/x, /oem/x, ... A bare
// top directory ("/dev/", a prefix a device check tests) names nothing.
var hostPath = regexp.MustCompile(`^/(etc|oem|run|usr|var|sys|proc|dev|tmp|boot|lib|opt|root|home|srv|mnt)/[^/\s]`)

// hostPaths lists every string literal of f that names a host path.
func hostPaths(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
			if v, err := strconv.Unquote(bl.Value); err == nil && hostPath.MatchString(v) {
				out = append(out, fmt.Sprintf("%s: names the host path %s: name it in %s and use the name", fset.Position(bl.Pos()), v, pathTable))
			}
		}
		return true
	})
	return out
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// violations lists every use in one parsed file of what the edge owns, as
// "file:line: what".
func violations(fset *token.FileSet, f *ast.File) []string {
	var out []string
	names := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if forbiddenImports[p] {
			out = append(out, fmt.Sprintf("%s: imports %s", fset.Position(im.Pos()), p))
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		if fileFuncs[p] != nil {
			names[name] = p
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || id.Obj != nil { // a local variable, not a package
			return true
		}
		if p, ok := names[id.Name]; ok && fileFuncs[p][sel.Sel.Name] {
			out = append(out, fmt.Sprintf("%s: %s.%s", fset.Position(sel.Pos()), id.Name, sel.Sel.Name))
		}
		return true
	})
	return out
}

// aroundTheEdge lists, in one parsed file of package rel, every way
// around the FS it is handed: a host.Root it builds (re-rooting a joined
// path when built from "", a nil FS's default when built under a `== nil`
// test), and a read of the kernel's interface table outside internal/nic.
func aroundTheEdge(fset *token.FileSet, f *ast.File, rel string) []string {
	var out []string
	hostName, netName := "", ""
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		switch p {
		case module + "/internal/host":
			hostName = name
		case "net":
			netName = name
		}
	}
	pkgCall := func(n ast.Node, pkg string) (*ast.CallExpr, string) {
		call, ok := n.(*ast.CallExpr)
		if !ok || pkg == "" {
			return nil, ""
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return nil, ""
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Obj != nil || id.Name != pkg {
			return nil, ""
		}
		return call, sel.Sel.Name
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		// nilTests are the bodies of `if x == nil` in fd.
		var nilTests []ast.Node
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if is, ok := n.(*ast.IfStmt); ok {
				if be, ok := is.Cond.(*ast.BinaryExpr); ok && be.Op == token.EQL {
					if id, ok := be.Y.(*ast.Ident); ok && id.Name == "nil" {
						nilTests = append(nilTests, is.Body)
					}
				}
			}
			return true
		})
		under := func(n ast.Node) bool {
			for _, b := range nilTests {
				if n.Pos() >= b.Pos() && n.End() <= b.End() {
					return true
				}
			}
			return false
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, fn := pkgCall(n, hostName); fn == "Root" && rootMakers[rel] != fd.Name.Name {
				what := "builds its own root (host.Root): use the FS it is handed"
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Value == `""` {
					what = "re-roots a path with host.Root(\"\"): a path --root joined is read through the FS that joined it"
				}
				if under(call) {
					what = "defaults a nil FS to the live root (host.Root): a nil FS is a caller's mistake, not the host"
				}
				out = append(out, fmt.Sprintf("%s: %s", fset.Position(call.Pos()), what))
			}
			if call, fn := pkgCall(n, netName); nicFuncs[fn] && rel != nicPackage {
				out = append(out, fmt.Sprintf("%s: net.%s: the kernel's interfaces are read through internal/nic", fset.Position(call.Pos()), fn))
			}
			return true
		})
	}
	return out
}

// agentPackages are the module's packages linked into the agent binary,
// with their directory and non-test Go files.
func agentPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles", "./cmd/agent")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/"); ok {
			p.Rel = rel
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

type goPackage struct {
	ImportPath, Dir, Rel string
	GoFiles, CgoFiles    []string
}

func TestNoWayAroundTheHostEdge(t *testing.T) {
	pkgs := agentPackages(t)
	// The scan must reach what it is meant to guard: a list that lost
	// these would pass while checking nothing.
	var rels []string
	for _, p := range pkgs {
		rels = append(rels, p.Rel)
	}
	for _, want := range []string{"agent", "agent/inventory", "apply", "bootstrap", "netpolicy", "nmstate", "tpm", "protocol", "cmd/agent", "internal/host"} {
		if !slices.Contains(rels, want) {
			t.Fatalf("%s is not among the agent's packages %v", want, rels)
		}
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range pkgs {
		if slices.Contains(edge, p.Rel) {
			continue
		}
		for _, name := range append(p.GoFiles, p.CgoFiles...) {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			rel := filepath.ToSlash(filepath.Join(p.Rel, name))
			found := append(violations(fset, f), aroundTheEdge(fset, f, p.Rel)...)
			if rel != pathTable {
				found = append(found, hostPaths(fset, f)...)
			}
			for _, v := range found {
				key := rel + ": " + v[strings.LastIndex(v, ": ")+2:]
				if _, ok := exceptions[key]; ok {
					used[key] = true
					continue
				}
				t.Errorf("%s: goes around internal/host (read, write or run through host.FS and host.Runner)", v)
			}
		}
	}
	if len(exceptions) > 3 {
		t.Errorf("%d exceptions: at most three", len(exceptions))
	}
	for k := range exceptions {
		if !used[k] {
			t.Errorf("exception %q matches nothing any more: remove it", k)
		}
	}
}

// The checker itself must catch each kind of use, renamed imports and the
// edge's parts included, and leave a local variable named os alone.
func TestViolationsCatchesEachKind(t *testing.T) {
	src := `package p

import (
	"os"
	run "os/exec"
	fp "path/filepath"
	"github.com/nodereg/nodereg/internal/safefile"
)

func f() {
	_, _ = os.ReadFile("/etc/x")
	_ = run.Command("true")
	_ = fp.WalkDir("/", nil)
	_, _ = safefile.ReadFile("/x", 1)
	_ = safefile.CheckPEM(nil)
	_ = os.Getenv("HOME")
	var os struct{ Stat int }
	_ = os.Stat
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := violations(fset, f)
	want := []string{"imports os/exec", "os.ReadFile", "fp.WalkDir", "safefile.ReadFile"}
	if len(got) != len(want) {
		t.Fatalf("violations = %q, want %d of them (%q)", got, len(want), want)
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], w) {
			t.Errorf("violation %d = %q, want one ending in %q", i, got[i], w)
		}
	}
}

// The way-around checker catches each kind, renamed imports included, and
// leaves the one maker of the run's FS, a local variable named host and
// internal/nic's own calls alone.
func TestAroundTheEdgeCatchesEachKind(t *testing.T) {
	src := `package p

import (
	h "github.com/nodereg/nodereg/internal/host"
	"net"
)

func f(files h.FS, p string) {
	_ = h.Root("/x")
	_, _ = h.Root("").ReadFile(p, 1)
	if files == nil {
		files = h.Root("/")
	}
	_, _ = net.Interfaces()
	_, _ = net.InterfaceByName("eth0")
	_ = h.Live(files)
	var host struct{ Root func(string) int }
	_ = host.Root("")
}

func newEnv() { _ = h.Root("/") }
`
	want := []string{"builds its own root", "re-roots a path", "defaults a nil FS", "net.Interfaces", "net.InterfaceByName"}
	for _, c := range []struct {
		rel  string
		want []string
	}{
		{"agent", want},
		{"apply", append(want, "builds its own root")},
		{"internal/nic", append(want[:3:3], "builds its own root")},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := aroundTheEdge(fset, f, c.rel)
		if len(got) != len(c.want) {
			t.Fatalf("%s: findings = %q, want %d of them (%q)", c.rel, got, len(c.want), c.want)
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: finding %d = %q, want one saying %q", c.rel, i, got[i], w)
			}
		}
	}
}

// The path check catches a host path in any string and leaves prefixes,
// relative names and URLs' paths alone.
func TestHostPathsCatchesEachKind(t *testing.T) {
	src := "package p\n\nconst a = \"/etc/NetworkManager/system-connections\"\n\n" +
		"var b = []string{\"/oem/nodereg/ca\", \"/dev/\", \"/registration/\", \"etc/x\", \"/run/\"}\n\n" +
		"func f() string { return `/sys/class/net` + \"/x\" }\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := hostPaths(fset, f)
	want := []string{"/etc/NetworkManager/system-connections", "/oem/nodereg/ca", "/sys/class/net"}
	if len(got) != len(want) {
		t.Fatalf("findings = %q, want %d (%q)", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], "names the host path "+w+":") {
			t.Errorf("finding %d = %q, want one naming %s", i, got[i], w)
		}
	}
}

// The page says what TestNoWayAroundTheHostEdge holds, naming what it
// names: who may build a root, who may read the kernel's interfaces, where
// host paths are named, and how many exceptions there are.
func TestArchitecturePageStatesTheEdge(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := strings.Join(strings.Fields(string(b)), " ")
	exceptionsClaim := "Its exception list is empty."
	if len(exceptions) > 0 {
		exceptionsClaim = fmt.Sprintf("Its exception list has %d entries", len(exceptions))
	}
	claims := []string{
		"no other file of the agent's packages names a host path: `tests/edge` fails on one",
		"on a host path named outside `" + pathTable + "`",
		"`net.Interfaces` or `net.InterfaceByName` outside `" + nicPackage + "`",
		exceptionsClaim,
	}
	for pkg, fn := range rootMakers {
		claims = append(claims, "on a `host.Root` built anywhere but `"+pkg+"."+fn+"`")
	}
	for _, claim := range claims {
		if !strings.Contains(page, claim) {
			t.Errorf("docs/architecture.md does not say %q: say it, or change the rule and its test together", claim)
		}
	}
}
