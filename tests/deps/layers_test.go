package deps

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The layering of docs/architecture.md ("Layers"), as rules the code's
// import graph must keep whatever the page's graph says: the page's arrows
// may change with the design, the direction may not. A package's tier is
// the first that names it (a name, or a prefix ending in "/").

// tier is one layer: its packages and the tiers it may import from.
type tier struct {
	name     string
	packages []string
	imports  []string
}

var tiers = []tier{
	// Shared helpers: the standard library and each other only.
	{"internal", []string{"internal/"}, []string{"internal"}},
	// The libraries a run drives (and agent/retry, a leaf though it sits
	// under agent/): internal/* and each other, never agent, agent/*, the
	// server or a command.
	{"library", []string{"agent/retry", "agent/retry/", "protocol", "tpm", "tpm/", "nmstate", "netpolicy", "apply", "bootstrap", "systemd", "machinereg"}, []string{"internal", "library"}},
	// The agent's own parts: libraries and internal/*, not each other and
	// not the run.
	{"agent part", []string{"agent/"}, []string{"internal", "library"}},
	// The run.
	{"agent", []string{"agent"}, []string{"internal", "library", "agent part"}},
	// The reference server: never the agent.
	{"server", []string{"server", "server/"}, []string{"internal", "library", "server"}},
	// The command lines.
	{"command", []string{"cmd/"}, []string{"internal", "library", "agent part", "agent", "server"}},
}

// only are packages held to a list of their own, within their tier's: the
// exit-code table knows the classes and nothing else; the class interface
// and the retry loop are leaves.
var only = map[string][]string{
	"agent/exitcode":    {"internal/errclass"},
	"internal/errclass": {},
	"agent/retry":       {},
}

func tierOf(pkg string) (tier, bool) {
	for _, t := range tiers {
		for _, p := range t.packages {
			if pkg == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) {
				return t, true
			}
		}
	}
	return tier{}, false
}

// checkLayers lists every arrow of g that goes against the layering, and
// every package no tier names.
func checkLayers(g graph) []string {
	var bad []string
	for _, p := range sortedKeys(g) {
		from, ok := tierOf(p)
		if !ok {
			bad = append(bad, fmt.Sprintf("package %s is in no tier of tests/deps/layers_test.go: give it one (docs/architecture.md, Layers)", p))
			continue
		}
		for _, imp := range g[p] {
			if allowed, ok := only[p]; ok && !slices.Contains(allowed, imp) {
				bad = append(bad, fmt.Sprintf("%s imports %s: it may import only %v", p, imp, allowed))
				continue
			}
			to, ok := tierOf(imp)
			if !ok {
				continue // reported as a package of its own
			}
			if !slices.Contains(from.imports, to.name) {
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): a %s may import only %v", p, from.name, imp, to.name, from.name, from.imports))
			}
		}
	}
	return bad
}

// TestLayering: the code's imports keep the layering.
func TestLayering(t *testing.T) {
	for _, msg := range checkLayers(codeGraph(t, "")) {
		t.Error(msg)
	}
}

// withOverlay is the code graph with one throwaway file (package pkgName in
// dir, importing imp) added through a go build overlay; the tree is not
// touched.
func withOverlay(t *testing.T, dir, pkgName, imp string) graph {
	t.Helper()
	root, err := filepath.Abs(moduleRoot())
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "throwaway.go")
	if err := os.WriteFile(src, []byte("package "+pkgName+"\n\nimport _ \"github.com/nodereg/nodereg/"+imp+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(root, dir, "zz_throwaway.go"): src}})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	return codeGraph(t, ov)
}

// A lower layer importing a higher one fails, and so does the exit-code
// table importing anything but the classes: each throwaway arrow is the
// one message.
func TestLowerLayerImportingHigherFails(t *testing.T) {
	for _, c := range []struct {
		dir, pkg, imp, want string
	}{
		{"internal/logx", "logx", "agent/retry", "internal/logx (internal) imports agent/retry (library)"},
		{"protocol", "protocol", "agent/exitcode", "protocol (library) imports agent/exitcode (agent part)"},
		{"agent/netreport", "netreport", "agent/verify", "agent/netreport (agent part) imports agent/verify (agent part)"},
		{"server/store", "store", "agent/exitcode", "server/store (server) imports agent/exitcode (agent part)"},
		{"agent/exitcode", "exitcode", "internal/logx", "agent/exitcode imports internal/logx: it may import only"},
	} {
		got := checkLayers(withOverlay(t, c.dir, c.pkg, c.imp))
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("%s importing %s: %q, want one message starting %q", c.dir, c.imp, got, c.want)
		}
	}
}

// The tiers' lookup: first match, names and prefixes.
func TestTierOf(t *testing.T) {
	for pkg, want := range map[string]string{
		"agent": "agent", "agent/retry": "library", "agent/retry/retrytest": "library", "agent/verify": "agent part",
		"internal/testutil/node": "internal", "server": "server", "server/ipam": "server", "cmd/agent": "command", "tpm/wire": "library",
	} {
		if got, ok := tierOf(pkg); !ok || got.name != want {
			t.Errorf("tierOf(%s) = %q, %v; want %q", pkg, got.name, ok, want)
		}
	}
	if _, ok := tierOf("agentx"); ok {
		t.Error("tierOf(agentx) found a tier")
	}
}
