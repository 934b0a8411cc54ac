// Package deps keeps the agent's import graph small, the way tailscale's
// depaware does: agent-modules.txt lists every module linked into bin/nodereg-agent
// (default build), and a module entering or leaving the binary fails the
// test until the list is updated on purpose. Kubernetes client libraries
// may never enter, whatever the list says.
package deps

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/nodereg/nodereg/internal/atomicfile"
)

var update = flag.Bool("update", false, "rewrite agent-modules.txt from the current import graph")

const (
	listFile   = "agent-modules.txt"
	selfModule = "github.com/nodereg/nodereg"
	agentPkg   = "./cmd/agent"
	updateHint = "if the change is intended, run `go test ./tests/deps -run TestAgentModules -update` " +
		"and commit tests/deps/agent-modules.txt, saying in the commit why the module is worth its size on every node"
)

// forbidden are modules the node binary must never link: the operator's
// Kubernetes libraries made the incumbent client a 47 MB binary.
var forbidden = []string{"k8s.io/", "sigs.k8s.io/controller-runtime", "k8s.io/client-go"}

// pkg is one package of the agent's import graph.
type pkg struct {
	path, module string
	std          bool
	imports      []string
}

// goListed holds the output of each go list this process ran, by its
// arguments: several tests read the same graph of a tree that does not
// change while they run, and each go list costs a few hundred ms.
var goListed sync.Map

// listDeps runs go list -deps on the agent with the given tags and cgo
// setting, from the module root.
func listDeps(t *testing.T, cgo bool, tags ...string) []pkg {
	t.Helper()
	key := fmt.Sprint("deps ", cgo, tags)
	if out, ok := goListed.Load(key); ok {
		return parseList(t, out.([]byte))
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not in PATH: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}\t{{if .Module}}{{.Module.Path}}{{end}}\t{{.Standard}}\t{{join .Imports \" \"}}"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, agentPkg)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = filepath.Join("..", "..")
	cgoEnv := "CGO_ENABLED=0"
	if cgo {
		cgoEnv = "CGO_ENABLED=1"
	}
	cmd.Env = append(os.Environ(), cgoEnv)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	goListed.Store(key, out)
	return parseList(t, out)
}

func parseList(t *testing.T, out []byte) []pkg {
	t.Helper()
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q: want 4 tab-separated fields", sc.Text())
		}
		pkgs = append(pkgs, pkg{path: f[0], module: f[1], std: f[2] == "true", imports: strings.Fields(f[3])})
	}
	if len(pkgs) == 0 {
		t.Fatal("go list printed no package")
	}
	return pkgs
}

// modules are the sorted non-std modules of pkgs, our own left out.
func modules(pkgs []pkg) []string {
	set := map[string]bool{}
	for _, p := range pkgs {
		if !p.std && p.module != "" && p.module != selfModule {
			set[p.module] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// checkForbidden names every forbidden module in mods.
func checkForbidden(mods []string) []string {
	var bad []string
	for _, m := range mods {
		for _, f := range forbidden {
			if m == strings.TrimSuffix(f, "/") || strings.HasPrefix(m, f) || strings.HasPrefix(m, f+"/") {
				bad = append(bad, m)
				break
			}
		}
	}
	return bad
}

// diff returns the modules in got but not in want, and the reverse.
func diff(got, want []string) (added, removed []string) {
	for _, m := range got {
		if !slices.Contains(want, m) {
			added = append(added, m)
		}
	}
	for _, m := range want {
		if !slices.Contains(got, m) {
			removed = append(removed, m)
		}
	}
	return added, removed
}

func readList(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(listFile)
	if err != nil {
		t.Fatalf("reading %s: %v (%s)", listFile, err, updateHint)
	}
	var mods []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		mods = append(mods, l)
	}
	return mods
}

func writeList(t *testing.T, mods []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# Modules linked into bin/nodereg-agent (default build: CGO_ENABLED=0, no tags), std and\n")
	b.WriteString("# github.com/nodereg/nodereg left out. Checked by tests/deps; regenerate with\n")
	b.WriteString("#   go test ./tests/deps -run TestAgentModules -update\n")
	b.WriteString("# and say in the commit why a new module is worth its size on every node.\n")
	for _, m := range mods {
		b.WriteString(m + "\n")
	}
	if err := atomicfile.Write(listFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAgentModules compares the modules linked into bin/nodereg-agent with the
// committed list.
func TestAgentModules(t *testing.T) {
	got := modules(listDeps(t, false))
	if bad := checkForbidden(got); len(bad) > 0 {
		t.Fatalf("bin/nodereg-agent links %s: Kubernetes client libraries may never enter the node binary (find the importer with `go mod why -m %s`)", strings.Join(bad, ", "), bad[0])
	}
	if *update {
		writeList(t, got)
		t.Logf("wrote %s: %d modules", listFile, len(got))
		return
	}
	want := readList(t)
	if bad := checkForbidden(want); len(bad) > 0 {
		t.Errorf("%s lists forbidden modules %s: remove them", listFile, strings.Join(bad, ", "))
	}
	added, removed := diff(got, want)
	if len(added) > 0 {
		t.Errorf("new modules linked into bin/nodereg-agent: %s\n%s", strings.Join(added, ", "), updateHint)
	}
	if len(removed) > 0 {
		t.Errorf("modules listed in %s are no longer linked into bin/nodereg-agent: %s\nrun `go test ./tests/deps -run TestAgentModules -update` to shrink the list", listFile, strings.Join(removed, ", "))
	}
}

// The emulated build may add the simulator, and nothing from Kubernetes.
func TestEmulatedBuildHasNoKubernetes(t *testing.T) {
	pkgs := listDeps(t, true, "emulatedtpm")
	mods := modules(pkgs)
	if bad := checkForbidden(mods); len(bad) > 0 {
		t.Fatalf("bin/nodereg-agent-emulated links %s: Kubernetes client libraries may never enter the node binary", strings.Join(bad, ", "))
	}
	// The tag must really select the simulator, or the next test proves
	// nothing.
	if !slices.Contains(mods, "github.com/google/go-tpm-tools") {
		t.Errorf("-tags emulatedtpm does not link go-tpm-tools: modules %v", mods)
	}
}

// The simulator (cgo, OpenSSL) stays behind the emulatedtpm tag.
func TestDefaultBuildHasNoSimulator(t *testing.T) {
	for _, p := range listDeps(t, false) {
		if p.module == "github.com/google/go-tpm-tools" {
			t.Errorf("default bin/nodereg-agent links %s: the emulated TPM must stay behind the emulatedtpm build tag", p.path)
		}
	}
}

// yip is used for its schema only: pkg/plugins runs sysinfo in init() and
// the executor pulls in the rest of the toolkit (docs/performance.md).
func TestAgentUsesOnlyYipSchema(t *testing.T) {
	const yip = "github.com/mudler/yip"
	const schema = yip + "/pkg/schema"
	pkgs := listDeps(t, false)
	sawSchema := false
	for _, p := range pkgs {
		if p.module == yip && p.path != schema && !strings.HasPrefix(p.path, schema+"/") {
			t.Errorf("bin/nodereg-agent links %s: only %s (and what it imports) is allowed", p.path, schema)
		}
		if p.module != selfModule {
			continue
		}
		for _, imp := range p.imports {
			if strings.HasPrefix(imp, yip+"/") || imp == yip {
				if imp != schema {
					t.Errorf("%s imports %s: import only %s", p.path, imp, schema)
				}
				sawSchema = true
			}
		}
	}
	if !sawSchema {
		t.Logf("no package of the agent imports %s", schema)
	}
}

// The checks themselves: a forbidden module is caught wherever it appears,
// and a list difference is reported both ways.
func TestCheckers(t *testing.T) {
	mods := []string{"github.com/gorilla/websocket", "k8s.io/client-go", "k8s.io/apimachinery", "sigs.k8s.io/controller-runtime", "sigs.k8s.io/yaml"}
	got := checkForbidden(mods)
	want := []string{"k8s.io/client-go", "k8s.io/apimachinery", "sigs.k8s.io/controller-runtime"}
	if !slices.Equal(got, want) {
		t.Errorf("checkForbidden = %v, want %v", got, want)
	}
	added, removed := diff([]string{"a", "b", "c"}, []string{"b", "c", "d"})
	if !slices.Equal(added, []string{"a"}) || !slices.Equal(removed, []string{"d"}) {
		t.Errorf("diff = %v, %v", added, removed)
	}
	pkgs := parseList(t, []byte("github.com/x/y/z\tgithub.com/x/y\tfalse\tfmt github.com/a/b\nfmt\t\ttrue\t\n"))
	if m := modules(pkgs); !slices.Equal(m, []string{"github.com/x/y"}) {
		t.Errorf("modules = %v", m)
	}
	if !slices.Equal(pkgs[0].imports, []string{"fmt", "github.com/a/b"}) {
		t.Errorf("imports = %v", pkgs[0].imports)
	}
}
