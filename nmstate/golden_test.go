package nmstate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readExpected parses the "=== <file name>" ... "=== END" blocks in which
// the vectors print nmstate's output (markers are not part of the files).
func readExpected(t *testing.T, path string) []Keyfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Keyfile
	var cur *Keyfile
	for _, line := range strings.SplitAfter(string(b), "\n") {
		switch {
		case line == "":
		case strings.HasPrefix(line, "=== END"):
			out = append(out, *cur)
			cur = nil
		case strings.HasPrefix(line, "=== "):
			cur = &Keyfile{Name: strings.TrimSpace(strings.TrimPrefix(line, "=== "))}
		case cur != nil:
			cur.Content = append(cur.Content, line...)
		default:
			t.Fatalf("%s: text outside a === block: %q", path, line)
		}
	}
	if cur != nil || len(out) == 0 {
		t.Fatalf("%s: unterminated or empty", path)
	}
	return out
}

func goldenCases(t *testing.T) []string {
	t.Helper()
	ins, err := filepath.Glob("testdata/golden/*.yaml")
	if err != nil || len(ins) < 7 {
		t.Fatalf("golden vectors missing: %v %v", ins, err)
	}
	return ins
}

// TestGolden: the first seven gen_conf vectors (testdata/golden),
// byte for byte, file names and order included.
func TestGolden(t *testing.T) {
	for _, in := range goldenCases(t) {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			desired, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want := readExpected(t, strings.TrimSuffix(in, ".yaml")+".keyfiles")
			got, err := GenerateKeyfiles(desired)
			if err != nil {
				t.Fatalf("GenerateKeyfiles: %v", err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d files %v, want %d %v", len(got), names(got), len(want), names(want))
			}
			for i := range want {
				if got[i].Name != want[i].Name {
					t.Errorf("file %d: name %q, want %q", i, got[i].Name, want[i].Name)
				}
				if !bytes.Equal(got[i].Content, want[i].Content) {
					t.Errorf("%s: content differs\n--- got\n%s--- want\n%s", want[i].Name, got[i].Content, want[i].Content)
				}
			}
		})
	}
}

func names(kfs []Keyfile) []string {
	var out []string
	for _, kf := range kfs {
		out = append(out, kf.Name)
	}
	return out
}

// TestSeedTemplate renders the IPAM design's seed template (REFERENCE.md /
// PROTOCOL.md 7.5, cmd/regserver/example.yaml) with its placeholder
// substituted and checks the [ipv4] keys the design asks for.
func TestSeedTemplate(t *testing.T) {
	for _, addr := range []string{"192.168.122.150", "10.88.0.2"} {
		got, err := GenerateKeyfiles([]byte(strings.ReplaceAll(seedTemplate, "{inventory-ip}", addr)))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Name != "enp1s0.nmconnection" {
			t.Fatalf("files %v, want [enp1s0.nmconnection]", names(got))
		}
		ipv4 := sectionOf(string(got[0].Content), "ipv4")
		for _, kv := range []string{"address0=" + addr + "/24", "route0=0.0.0.0/0,192.168.122.1,150", "route0_options=table=254", "dns=192.168.122.1", "method=manual"} {
			if !strings.Contains(ipv4, "\n"+kv+"\n") {
				t.Errorf("%s: [ipv4] lacks %q:\n%s", addr, kv, ipv4)
			}
		}
	}
}

// seedTemplate is the nmstate config of the seed example as the server
// sends it: node.NmstateConfig(). This package's own tests cannot import
// internal/testutil/node (node imports apply, which imports nmstate), so the
// copy stays and TestSeedTemplateIsTheServersTemplate keeps the two equal.
const seedTemplate = `interfaces:
- name: enp1s0
  type: ethernet
  description: Main-NIC
  state: up
  ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
  ipv6: {enabled: false}
routes:
  config:
  - {destination: 0.0.0.0/0, next-hop-interface: enp1s0, next-hop-address: 192.168.122.1, metric: 150, table-id: 254}
dns-resolver:
  config: {server: [192.168.122.1], search: []}
`

// sectionOf returns "[name]\n...\n" up to the next section, with a leading
// newline so whole lines can be matched.
func sectionOf(keyfile, name string) string {
	_, rest, ok := strings.Cut("\n"+keyfile, "\n["+name+"]\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n["); i >= 0 {
		rest = rest[:i+1]
	}
	return "\n" + rest
}
