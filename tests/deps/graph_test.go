package deps

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The import graph of docs/architecture.md is the allowlist of who may
// import whom among nodereg's packages: an arrow in the code that the page
// does not show, an arrow on the page the code no longer has, and a
// package the page does not list all fail, so the page and the code cannot
// drift apart. Test files are left out (tests may import what they test
// with), and so is tests/..., which holds only tests, their stubs and
// tools.

const architecturePage = "docs/architecture.md"

// graph maps a package (relative to the module, e.g. "agent/retry") to the
// nodereg packages it imports.
type graph map[string][]string

// moduleRoot is the repository, two levels up from this package.
func moduleRoot() string { return filepath.Join("..", "..") }

// pageGraph reads the import graph block of the architecture page: lines
// `pkg -> a, b, c` (continued on indented lines), notes in parentheses
// ignored, `(none)` for no nodereg import.
func pageGraph(text string) (graph, error) {
	start := strings.Index(text, "## Import graph")
	if start < 0 {
		return nil, fmt.Errorf("%s has no \"## Import graph\" section", architecturePage)
	}
	rest := text[start:]
	open := strings.Index(rest, "```\n")
	if open < 0 {
		return nil, fmt.Errorf("%s: the import graph section has no code block", architecturePage)
	}
	rest = rest[open+4:]
	end := strings.Index(rest, "```")
	if end < 0 {
		return nil, fmt.Errorf("%s: the import graph block is not closed", architecturePage)
	}
	g := graph{}
	notes := regexp.MustCompile(`\([^)]*\)`)
	var last string
	sc := bufio.NewScanner(strings.NewReader(rest[:end]))
	for n := 1; sc.Scan(); n++ {
		line := notes.ReplaceAllString(sc.Text(), "")
		if strings.TrimSpace(line) == "" {
			continue
		}
		rhs := line
		if lhs, r, ok := strings.Cut(line, "->"); ok {
			last = strings.TrimSpace(lhs)
			if _, dup := g[last]; dup || last == "" || strings.ContainsAny(last, " ,") {
				return nil, fmt.Errorf("%s, import graph line %d: %q: one package per left side, once", architecturePage, n, sc.Text())
			}
			g[last] = []string{}
			rhs = r
		} else if last == "" || !strings.HasPrefix(line, " ") {
			return nil, fmt.Errorf("%s, import graph line %d: %q is neither `pkg -> ...` nor a continuation", architecturePage, n, sc.Text())
		}
		for _, p := range strings.Split(rhs, ",") {
			if p = strings.TrimSpace(p); p != "" {
				g[last] = append(g[last], p)
			}
		}
	}
	return g, nil
}

// codeGraph is the graph of the module's packages as go list sees them,
// tests/... left out; overlay (a go build -overlay file, "" for none) adds
// files that are not on disk.
func codeGraph(t *testing.T, overlay string) graph {
	t.Helper()
	args := []string{"list", "-e", "-json=ImportPath,Imports,Error"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	// The tree's own graph (no overlay) is listed once per process.
	key := "graph " + overlay
	cached, ok := goListed.Load(key)
	out, _ := cached.([]byte)
	if !ok || overlay != "" {
		cmd := exec.Command("go", append(args, "./...")...)
		cmd.Dir = moduleRoot()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		var err error
		if out, err = cmd.Output(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		if overlay == "" {
			goListed.Store(key, out)
		}
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, selfModule+"/")
		if !ok || rel == "tests" || strings.HasPrefix(rel, "tests/") {
			continue
		}
		g[rel] = []string{}
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, selfModule+"/"); ok {
				g[rel] = append(g[rel], r)
			}
		}
	}
	return g
}

// checkGraph compares the code's graph with the page's, one message per
// difference.
func checkGraph(page, code graph) []string {
	var bad []string
	for _, p := range sortedKeys(code) {
		allowed, listed := page[p]
		if !listed {
			bad = append(bad, fmt.Sprintf("package %s is not in the import graph of %s: add it with its imports", p, architecturePage))
			continue
		}
		for _, imp := range code[p] {
			if !slices.Contains(allowed, imp) {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s does not show that arrow (add it there if the design changed, or drop the import)", p, imp, architecturePage))
			}
		}
		for _, a := range allowed {
			if !slices.Contains(code[p], a) {
				bad = append(bad, fmt.Sprintf("%s shows %s -> %s, which the code no longer has: remove it from the page", architecturePage, p, a))
			}
		}
	}
	for _, p := range sortedKeys(page) {
		if _, ok := code[p]; !ok {
			bad = append(bad, fmt.Sprintf("%s lists package %s, which does not exist", architecturePage, p))
		}
	}
	return bad
}

func sortedKeys(g graph) []string {
	out := make([]string, 0, len(g))
	for k := range g {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func readPageGraph(t *testing.T) graph {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(), architecturePage))
	if err != nil {
		t.Fatal(err)
	}
	g, err := pageGraph(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestImportGraphMatchesArchitecturePage: the code has exactly the arrows
// the page shows.
func TestImportGraphMatchesArchitecturePage(t *testing.T) {
	for _, msg := range checkGraph(readPageGraph(t), codeGraph(t, "")) {
		t.Error(msg)
	}
}

// A throwaway import the page does not show (internal/logx importing
// internal/atomicfile, added through a go build overlay, so the tree is not
// touched) is caught, and is the only difference.
func TestUndocumentedArrowFails(t *testing.T) {
	got := checkGraph(readPageGraph(t), withOverlay(t, "internal/logx", "logx", "internal/atomicfile"))
	want := "internal/logx imports internal/atomicfile: " + architecturePage + " does not show that arrow"
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("with a throwaway arrow: %q, want one message starting %q", got, want)
	}
}

// The page's parser: continuation lines, notes, (none), and the errors.
func TestPageGraphParser(t *testing.T) {
	g, err := pageGraph("x\n## Import graph (nodereg packages only)\n\n```\na   -> b, c (a note)\n       d\ne   -> (none)\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g["a"], []string{"b", "c", "d"}) || g["e"] == nil || len(g["e"]) != 0 || len(g) != 2 {
		t.Errorf("pageGraph = %v", g)
	}
	for _, bad := range []string{"## Import graph\n```\na -> b\na -> c\n```\n", "## Import graph\n```\nb, c\n```\n", "no graph"} {
		if _, err := pageGraph(bad); err == nil {
			t.Errorf("pageGraph(%q) accepted", bad)
		}
	}
	// Each kind of difference is reported.
	msgs := checkGraph(graph{"a": {"b"}, "gone": {}}, graph{"a": {"c"}, "new": {}})
	if len(msgs) != 4 {
		t.Errorf("checkGraph: %q, want 4 messages (new arrow, stale arrow, new package, gone package)", msgs)
	}
}
