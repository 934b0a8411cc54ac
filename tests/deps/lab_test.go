package deps

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// labPackage and cachePackage are where the test code may start regserver
// and build binaries (docs/development.md, "The lab").
const (
	labPackage   = "internal/testutil/labkit"
	cachePackage = "internal/testutil/testbin"
)

// regserverPkg and regserverName, spelled so that this file names neither.
const (
	regserverName = "reg" + "server"
	regserverPkg  = "cmd/" + regserverName
)

// labExceptions are the test files that name the regserver binary
// themselves, each for its reason.
var labExceptions = map[string]string{
	"tests/doccheck/doccheck_test.go": "links the built regserver as the docs' bin/regserver, so their command lines run as written (its servers start through labkit)",
	"tests/cli/demo_test.go":          "hands the built regserver to tests/demo.sh, which starts it as a reader of the demo does",
}

// labFindings reads the code a go test runs (every _test.go file of the
// module, whatever its build tags, and the helpers under internal/testutil)
// outside labkit and testbin, with overlay's files (path relative to the
// module root: source) added or put in place of the tree's, and reports
// each place that names the regserver binary (its package or a bin/
// path: the only reason to is to start it), each `go build` or `make
// build` it would run and each namespace it would make, remove or enter
// with `ip netns` itself.
func labFindings(t *testing.T, overlay map[string]string) []string {
	t.Helper()
	root, err := filepath.Abs(moduleRoot())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || rel == "tmp" || rel == labPackage || rel == cachePackage) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, "_test.go") || (strings.HasPrefix(rel, "internal/testutil/") && strings.HasSuffix(rel, ".go")) {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel, src := range overlay {
		files[rel] = src
	}
	var bad []string
	fset := token.NewFileSet()
	for _, rel := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		f, err := parser.ParseFile(fset, rel, files[rel], parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, labViolations(fset, rel, f)...)
	}
	return bad
}

// labViolations is labFindings for one file.
func labViolations(fset *token.FileSet, rel string, f *ast.File) []string {
	var bad []string
	at := func(n ast.Node) string { return fmt.Sprintf("%s:%d", rel, fset.Position(n.Pos()).Line) }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			s, ok := literal(n)
			if ok && (s == regserverPkg || strings.HasSuffix(s, "/"+regserverName)) && labExceptions[rel] == "" {
				bad = append(bad, fmt.Sprintf("%s: names the regserver binary (%q): start it with labkit.StartRegserver", at(n), s))
			}
		case *ast.CallExpr:
			if w := buildCommand(n.Args); w != "" {
				bad = append(bad, fmt.Sprintf("%s: runs %s: %s", at(n), w, labWay(w)))
			}
		case *ast.CompositeLit:
			if w := buildCommand(n.Elts); w != "" {
				bad = append(bad, fmt.Sprintf("%s: runs %s: %s", at(n), w, labWay(w)))
			}
		}
		return true
	})
	return bad
}

// buildCommand names what exprs run that only labkit and testbin may:
// "go build" ("go" then "build"), "make build" ("make", then "build"
// among its arguments), or a namespace made, removed or entered by hand
// ("netns" then "add", "del" or "exec"); "" when none.
func buildCommand(exprs []ast.Expr) string {
	lits := make([]string, len(exprs))
	for i, e := range exprs {
		if l, ok := e.(*ast.BasicLit); ok {
			lits[i], _ = literal(l)
		}
	}
	for i, s := range lits {
		next := ""
		if i+1 < len(lits) {
			next = lits[i+1]
		}
		switch {
		case s == "go" && next == "build":
			return "go build"
		case s == "make" && slices.Contains(lits[i+1:], "build"):
			return "make build"
		case s == "netns" && (next == "add" || next == "del" || next == "exec"):
			return "ip netns " + next
		}
	}
	return ""
}

// labWay is what to use instead of what buildCommand found.
func labWay(what string) string {
	if strings.HasPrefix(what, "ip netns") {
		return "make and enter namespaces with labkit (AddNS, CreateNS, InNS)"
	}
	return "build through testbin.Build (its cache, shared by the run)"
}

func literal(l *ast.BasicLit) (string, bool) {
	if l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

// TestOneLab: the test code starts regserver and makes and enters network
// namespaces only through labkit, and builds binaries only through
// testbin, so one build of each serves the whole run (docs/development.md,
// "The lab").
func TestOneLab(t *testing.T) {
	for _, msg := range labFindings(t, nil) {
		t.Error(msg)
	}
	for rel := range labExceptions {
		if _, err := os.Stat(filepath.Join(moduleRoot(), rel)); err != nil {
			t.Errorf("labExceptions names %s: %v", rel, err)
		}
	}
}

// Each way around the lab fails: a throwaway test file that does it makes
// the one message.
func TestOneLabCatchesEachKind(t *testing.T) {
	const head = "package zz\n\nimport (\n\t\"os/exec\"\n\t\"testing\"\n\n\t\"github.com/nodereg/nodereg/internal/testutil/testbin\"\n)\n\n"
	for _, c := range []struct{ name, src, want string }{
		{"regserver started by hand", `func TestZz(t *testing.T) { _ = exec.Command(testbin.Build(t, "./cmd/regserver"), "--listen", "127.0.0.1:0").Start() }`,
			`tests/zz/zz_test.go:10: names the regserver binary ("./cmd/regserver")`},
		{"make build's regserver", `func TestZz(t *testing.T) { _ = exec.Command("bin/regserver").Start() }`,
			`tests/zz/zz_test.go:10: names the regserver binary ("bin/regserver")`},
		{"go build", `func TestZz(t *testing.T) { _ = exec.Command("go", "build", "-o", t.TempDir(), "./cmd/agent").Run() }`,
			"tests/zz/zz_test.go:10: runs go build"},
		{"go build in a slice", `var argv = []string{"go", "build", "./cmd/agent"}`,
			"tests/zz/zz_test.go:10: runs go build"},
		{"make build in TestMain", `func TestMain(m *testing.M) { _ = exec.Command("make", "--no-print-directory", "build").Run(); m.Run() }`,
			"tests/zz/zz_test.go:10: runs make build"},
		{"namespace made by hand", `func TestZz(t *testing.T) { _ = exec.Command("ip", "netns", "add", "zz").Run() }`,
			"tests/zz/zz_test.go:10: runs ip netns add: make and enter namespaces with labkit"},
		{"namespace entered by hand", `var argv = []string{"ip", "netns", "exec", "zz", "true"}`,
			"tests/zz/zz_test.go:10: runs ip netns exec: make and enter namespaces with labkit"},
	} {
		got := labFindings(t, map[string]string{"tests/zz/zz_test.go": head + c.src + "\n"})
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s: %q, want one message starting %q", c.name, got, c.want)
		}
	}
}
