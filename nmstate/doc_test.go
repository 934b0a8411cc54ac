package nmstate

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var indexRE = regexp.MustCompile(`\[[0-9]+\]`)

// parserKeys runs the parser over every vector and the extra inputs and
// returns each key path it reads ("interfaces[].ipv4.auto-dns").
func parserKeys(t *testing.T, extra []string) []string {
	seen := map[string]bool{}
	keyRecorder = func(path string, known []string) {
		p := indexRE.ReplaceAllString(path, "[]")
		for _, k := range known {
			seen[join(p, k)] = true
		}
	}
	defer func() { keyRecorder = nil }()
	for _, v := range loadVectors(t) {
		_, _ = GenerateKeyfiles(v.input)
	}
	for _, in := range extra {
		_, _ = GenerateKeyfiles([]byte(in))
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// docKeys are the backquoted key paths (those starting at a top-level key;
// values like `up` are not) in the first column of the subset table of
// docs/nmstate.md.
func docKeys(t *testing.T) []string {
	b, err := os.ReadFile("../docs/nmstate.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Supported subset")
	if !ok {
		t.Fatal("docs/nmstate.md has no \"## Supported subset\" section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var out []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`((interfaces|routes|route-rules|dns-resolver)[^`]*)`").FindAllStringSubmatch(first, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDocumentedSubsetIsTheParsers: the key paths docs/nmstate.md lists as
// supported are exactly those the parser reads.
func TestDocumentedSubsetIsTheParsers(t *testing.T) {
	code := parserKeys(t, docExtraInputs)
	doc := docKeys(t)
	for _, k := range code {
		if !slices.Contains(doc, k) {
			t.Errorf("the parser reads %s; docs/nmstate.md's subset table does not list it", k)
		}
	}
	for _, k := range doc {
		if !slices.Contains(code, k) {
			t.Errorf("docs/nmstate.md lists %s; the parser does not read it", k)
		}
	}
}

// docExtraInputs reach the key lists no vector reaches.
var docExtraInputs = []string{
	"interfaces:\n- {name: br0, type: linux-bridge, bridge: {ports: [{name: eth1}]}}",
	"interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 1, ports: [eth1]}}",
}
