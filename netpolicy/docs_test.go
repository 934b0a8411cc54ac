package netpolicy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var backticked = regexp.MustCompile("`([^`]+)`")

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// listAfter is the backticked words of the line of doc that starts with
// prefix (before any parenthesis).
func listAfter(t *testing.T, doc, prefix string) []string {
	t.Helper()
	for _, line := range strings.Split(doc, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			rest, _, _ = strings.Cut(rest, " (")
			var out []string
			for _, m := range backticked.FindAllStringSubmatch(rest, -1) {
				out = append(out, m[1])
			}
			return out
		}
	}
	t.Fatalf("no line starts with %q", prefix)
	return nil
}

func sameSet(t *testing.T, what string, doc, code []string) {
	t.Helper()
	d, c := slices.Sorted(slices.Values(doc)), slices.Sorted(slices.Values(code))
	if !slices.Equal(d, c) {
		t.Errorf("%s: docs/reliability.md lists %v, the policy %v", what, d, c)
	}
}

// TestPolicyListsMatchDocs: docs/reliability.md lists exactly what the
// policy allows, and that covers everything docs/nmstate.md says the
// translator supports: its interface kinds, the interface and top-level
// keys of its subset, the connection types and keyfile sections it writes.
func TestPolicyListsMatchDocs(t *testing.T) {
	rel := readDoc(t, "reliability.md")
	sameSet(t, "nmstate interface types", listAfter(t, rel, "- nmstate interface types:"), allowedKinds)
	sameSet(t, "keyfile connection types", listAfter(t, rel, "- keyfile connection types:"), allowedTypes)
	sameSet(t, "keyfile sections", listAfter(t, rel, "- keyfile sections:"), allowedSections)

	nm := readDoc(t, "nmstate.md")
	var typeRow []string
	for _, line := range strings.Split(nm, "\n") {
		if strings.HasPrefix(line, "| `interfaces[].type`:") {
			typeRow = strings.Split(line, "|")
		}
	}
	if len(typeRow) < 3 {
		t.Fatal("docs/nmstate.md has no `interfaces[].type` row")
	}
	kindCell := regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(typeRow[1], "")
	var kinds []string
	for _, m := range backticked.FindAllStringSubmatch(kindCell, -1) {
		if m[1] != "interfaces[].type" {
			kinds = append(kinds, m[1])
		}
	}
	sameSet(t, "docs/nmstate.md's interface kinds vs the policy's", kinds, allowedKinds)
	keyfileCell, _, _ := strings.Cut(typeRow[2], ";")
	for _, m := range backticked.FindAllStringSubmatch(keyfileCell, -1) {
		if ty := strings.TrimPrefix(m[1], "type="); !slices.Contains(allowedTypes, ty) {
			t.Errorf("docs/nmstate.md's translator writes type %q, which the policy refuses", ty)
		}
	}

	start := strings.Index(nm, "## Supported subset")
	end := strings.Index(nm, "### Listing order")
	if start < 0 || end < start {
		t.Fatal("docs/nmstate.md has no Supported subset section")
	}
	for _, line := range strings.Split(nm[start:end], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		// The paths of the first column; values follow a colon.
		paths, _, _ := strings.Cut(cells[1], "`:")
		for _, m := range backticked.FindAllStringSubmatch(paths+"`", -1) {
			top, rest, _ := strings.Cut(m[1], ".")
			if !slices.Contains(allowedTop, strings.TrimSuffix(top, "[]")) && !strings.HasPrefix(top, "interfaces") {
				t.Errorf("docs/nmstate.md supports %s, the policy refuses its top-level key", m[1])
			}
			if top == "interfaces[]" {
				key, _, _ := strings.Cut(rest, ".")
				if !slices.Contains(allowedIface, key) {
					t.Errorf("docs/nmstate.md supports %s, the policy refuses interface key %q", m[1], key)
				}
			}
		}
		for _, m := range regexp.MustCompile("`\\[([a-z0-9-]+)\\]`").FindAllStringSubmatch(cells[2], -1) {
			if !slices.Contains(allowedSections, m[1]) {
				t.Errorf("docs/nmstate.md's translator writes section [%s], which the policy refuses", m[1])
			}
		}
	}
}
