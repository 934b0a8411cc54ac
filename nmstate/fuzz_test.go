package nmstate

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzGenerateKeyfiles: any input renders or is refused with an *Error,
// never a panic; what renders is well-formed and deterministic. Each input
// is read twice: as a desired state, and as choices for genState, which
// keeps the fuzzer inside well-formed states where the rendering rules are.
// TestNetworkManagerAcceptsGenerated feeds the cached inputs to nmcli.
func FuzzGenerateKeyfiles(f *testing.F) {
	ins, _ := filepath.Glob("testdata/golden/*.yaml")
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(eth0v4 + "routes:\n  config:\n  - {destination: 0.0.0.0/0, next-hop-interface: eth0, weight: 3}\ndns-resolver:\n  config: {server: [192.0.2.53], search: [a.example]}"))
	f.Add([]byte("interfaces:\n- {name: bond0, type: bond, link-aggregation: {mode: 4, options: {miimon: 100, lacp_rate: 1}, port: [eth1, eth2]}}"))
	f.Add([]byte{0x31, 0x02, 0x07, 0x00, 0xff, 0x10, 0x33})
	// Every gen_conf vector seeds the corpus, so the fuzzer starts from
	// inputs that reach every key of the subset.
	vecs, _ := filepath.Glob("testdata/vectors/*/input.yaml")
	for _, in := range vecs {
		b, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRenderOrRefuse(t, data)
		checkRenderOrRefuse(t, []byte(genState(data)))
	})
}

func checkRenderOrRefuse(t *testing.T, in []byte) {
	kfs, err := GenerateKeyfiles(in)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Reason == "" || e.Kind == "" {
			t.Fatalf("refusal %v is not a complete *Error", err)
		}
		return
	}
	again, err := GenerateKeyfiles(in)
	if err != nil || len(again) != len(kfs) {
		t.Fatalf("second run differs: %v", err)
	}
	seen := map[string]bool{}
	for i, kf := range kfs {
		if !bytes.Equal(kf.Content, again[i].Content) || kf.Name != again[i].Name {
			t.Fatalf("%s: output not deterministic", kf.Name)
		}
		id, ok := strings.CutSuffix(kf.Name, ".nmconnection")
		if !ok || id == "" || strings.ContainsAny(id, "/\\\x00") || strings.HasPrefix(id, ".") || seen[kf.Name] {
			t.Fatalf("bad or repeated file name %q", kf.Name)
		}
		seen[kf.Name] = true
		checkKeyfileShape(t, kf, id)
	}
}

// checkKeyfileShape: nmstate's layout — [connection] first with id = file
// name, "key=value" lines, one blank line between sections, one final \n.
func checkKeyfileShape(t *testing.T, kf Keyfile, id string) {
	text := string(kf.Content)
	if !strings.HasPrefix(text, "[connection]\n") || !strings.HasSuffix(text, "\n") || strings.HasSuffix(text, "\n\n") {
		t.Fatalf("%s: bad framing:\n%s", kf.Name, text)
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		switch {
		case l == "":
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "[") {
				t.Fatalf("%s: blank line not before a section:\n%s", kf.Name, text)
			}
		case strings.HasPrefix(l, "["):
			if !strings.HasSuffix(l, "]") || (i > 0 && lines[i-1] != "") {
				t.Fatalf("%s: bad section line %q", kf.Name, l)
			}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" || v == "" || strings.ContainsAny(l, "\r\x00\\") {
				t.Fatalf("%s: bad line %q", kf.Name, l)
			}
		}
	}
	if !strings.Contains(text, "\nid="+id+"\n") {
		t.Fatalf("%s: id does not match the file name", kf.Name)
	}
}
