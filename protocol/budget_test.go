package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/vectors"
)

// parsedNodes counts the nodes yaml.v3 builds for p, aliases not expanded.
func parsedNodes(t testing.TB, p []byte) (int, bool) {
	var root yaml.Node
	if err := yaml.Unmarshal(p, &root); err != nil {
		return 0, false
	}
	var count func(*yaml.Node) int
	count = func(n *yaml.Node) int {
		c := 1
		for _, ch := range n.Content {
			c += count(ch)
		}
		return c
	}
	return count(&root), true
}

// estimateSamples are documents that try every way yaml.v3 has of making a
// node out of few bytes: implied nulls, empty keys, compact nesting, flow
// pairs, properties glued to values, comments and quotes.
var estimateSamples = []string{
	"",
	"a",
	"-\n-\n-\n",
	"- - - - 1\n",
	"- -\n  -\n",
	"a:\nb:\nc:\n",
	": x\n: y\n",
	"? a\n? b\n",
	"? - a\n  - b\n: c\n",
	"{a, b, c}",
	"{a, b,}",
	"{: , : }",
	"[a: 1, b: 2, : ]",
	"[? a, ? b]",
	"[[[[]]]]",
	"{\"a\":1,\"b\":[1,2,{\"c\":null}]}",
	"x: &a [1, 2]\ny: *a\nz: [*a, *a]\n",
	"- &a\n  k: v\n- !!map\n  k: v\n- !!null\n",
	"a: !!str\nb: &x\nc: *x\n",
	"a: |\n  text\n  more\nb: >-\n  folded\n",
	"- \"a, b: c\" # comment [x]\n- 'd - e'\n",
	"a: b: c",
	"-1\n",
	"a:\n- 1\n- 2\nb:\n-\n- - x\n",
	"--- \n- a\n...\n",
	"raw:\n    - 91\n    - 93\nobject: null\n",
	"\ufeffa: 1\n",
	"a:\t[1,\t2]\n",
	"- a\n-\n- b\n-",
	"[a,\n b,\n c]",
	"{a: [b, {c: d, e}], f}",
}

// TestEstimateNodesIsAnUpperBound: the cheap count never undercounts the
// nodes yaml.v3 builds, or the pre-check would let a large tree be built.
func TestEstimateNodesIsAnUpperBound(t *testing.T) {
	docs := append([]string{}, estimateSamples...)
	docs = append(docs, string(vectors.Read(t, "upstream-msgconfig-network.yaml")))
	for _, d := range docs {
		got, ok := parsedNodes(t, []byte(d))
		if !ok {
			continue
		}
		if est := estimateNodes([]byte(d)); est < got {
			t.Errorf("%q: estimate %d < %d nodes", d, est, got)
		}
	}
}

// TestEstimateNodesOnUpstreamEncoding: upstream's raw byte lists cost one
// estimated node per byte, so the budget means what its comment says.
func TestEstimateNodesOnUpstreamEncoding(t *testing.T) {
	value := strings.Repeat("x", 10000)
	b, err := EncodeConfigReply(&ConfigReply{Config: Config{CloudConfig: map[string]RawValue{"users": {Value: value}}}}, Version)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := parsedNodes(t, b)
	est := estimateNodes(b)
	if est > got+20 {
		t.Errorf("raw form of %d bytes: estimate %d for %d nodes", len(value), est, got)
	}
}

func FuzzEstimateNodes(f *testing.F) {
	for _, d := range estimateSamples {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > 4096 {
			return
		}
		got, ok := parsedNodes(t, p)
		if ok && estimateNodes(p) < got {
			t.Fatalf("%q: estimate %d < %d nodes", p, estimateNodes(p), got)
		}
	})
}

// aliasReply is a reply whose anchors hang under an ignored top-level key
// and whose keys under section each reference them: small on the wire,
// large once expanded.
func aliasReply(section string, keys int, value string) []byte {
	var b strings.Builder
	b.WriteString("anchors:\n    a: &a [" + strings.TrimSuffix(strings.Repeat("0, ", 1000), ", ") + "]\n")
	b.WriteString("    b: &b [" + strings.TrimSuffix(strings.Repeat("*a, ", 390), ", ") + "]\n")
	b.WriteString("configurator: nmstate\n" + section + ":\n")
	for i := 0; i < keys; i++ {
		fmt.Fprintf(&b, "    k%d: %s\n", i, value)
	}
	return []byte(b.String())
}

// TestReplyBudgetRefusesAliasExpansion: each value under the limit of its
// own decoder, all together far over the reply's.
func TestReplyBudgetRefusesAliasExpansion(t *testing.T) {
	for _, c := range []struct{ name, section, value string }{
		{"network config", "config", "[0, *b]"},
		{"cloud-config", "cloud-config", "[0, *b]"},
		{"raw bytes", "config", "{raw: *a, object: null}"},
		{"nested sequences of maps", "config", "[{x: [*a, *a]}, {y: [{z: *a}]}]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := aliasReply(c.section, 400, c.value)
			local := Config{Elemental: Elemental{Registration: Registration{URL: "https://local/elemental/registration/x", Labels: map[string]string{"k": "v"}}}}
			cfg := local.clone()
			r, err := DecodeConfigReply(doc, &cfg)
			if !errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), "decoding config reply") {
				t.Fatalf("%d bytes: reply %v, err %v", len(doc), r, err)
			}
			if !reflect.DeepEqual(cfg, local) {
				t.Errorf("a refused reply changed the config: %+v", cfg)
			}
			t.Logf("%d bytes: %v", len(doc), err)
		})
	}
}

// TestReplyBudgetRefusesLongStrings: aliases of a long string, a few
// references each, exceed the text budget, not the node budget.
func TestReplyBudgetRefusesLongStrings(t *testing.T) {
	doc := "s: &s " + strings.Repeat("x", 1<<20) + "\ncloud-config:\n    users: [*s, *s, *s, *s, *s]\n"
	var cfg Config
	_, err := DecodeConfigReply([]byte(doc), &cfg)
	if !errors.Is(err, ErrReplyTooLarge) || !strings.Contains(err.Error(), "bytes of text") {
		t.Fatalf("err %v", err)
	}
}

// TestReplyBudgetPerValue: RawValue alone, decoded outside a reply, keeps
// its own budget.
func TestReplyBudgetPerValue(t *testing.T) {
	var v map[string]RawValue
	doc := aliasReply("x", 1, "[*b, *b, *b, *b]")
	err := yaml.Unmarshal(doc, &struct {
		X *map[string]RawValue `yaml:"x"`
	}{&v})
	if !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("err %v", err)
	}
}

func TestReplyBudgetRefusesAnchorCycle(t *testing.T) {
	var cfg Config
	_, err := DecodeConfigReply([]byte("config: &c {k: [*c]}\n"), &cfg)
	if err == nil {
		t.Fatal("cyclic anchor accepted")
	}
	t.Log(err)
}

// TestReplyBudgetAdmitsLargeUpstreamReply: a reply in upstream's encoding
// with 100 KiB of cloud-config and a network config passes.
func TestReplyBudgetAdmitsLargeUpstreamReply(t *testing.T) {
	files := make([]any, 100)
	for i := range files {
		files[i] = map[string]any{"path": fmt.Sprintf("/etc/f%d", i), "content": strings.Repeat("y", 1000)}
	}
	reply := &ConfigReply{
		Config: Config{CloudConfig: map[string]RawValue{"write_files": {Value: files}}},
		Network: &NetworkConfig{Configurator: ConfiguratorNmstate, IPAddresses: map[string]string{"ip": "10.0.0.5"},
			Config: map[string]RawValue{"interfaces": {Value: []any{map[string]any{"name": "eth0", "type": "ethernet"}}}}},
	}
	b, err := EncodeConfigReply(reply, Version)
	if err != nil {
		t.Fatal(err)
	}
	var cfg Config
	r, err := DecodeConfigReply(b, &cfg)
	if err != nil {
		t.Fatalf("%d-byte reply refused: %v", len(b), err)
	}
	if got := cfg.CloudConfig["write_files"].Value.([]any); len(got) != 100 || r.Network.IPAddresses["ip"] != "10.0.0.5" {
		t.Errorf("decoded %d files, network %+v", len(got), r.Network)
	}
	t.Logf("%d-byte reply, estimate %d nodes of %d", len(b), estimateNodes(b), MaxReplyNodes)
}
