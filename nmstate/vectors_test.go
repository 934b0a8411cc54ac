package nmstate

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The vectors in testdata/vectors were made by nmstate's own gen_conf at
// MatchedCommit (a copy of the team's shared nmstate-vectors, README.md
// inside). Each is an input.yaml with either the keyfiles gc wrote, in gc's
// order (expected), or gc's refusal (error: "ERROR <Kind>: <message>").

type vector struct {
	name     string
	input    []byte
	expected []Keyfile // nil for an error vector
	errKind  string
	errText  string
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	dirs, err := filepath.Glob("testdata/vectors/[0-9]*")
	if err != nil || len(dirs) < 155 {
		t.Fatalf("nmstate vectors missing: %d dirs, %v", len(dirs), err)
	}
	var out []vector
	for _, d := range dirs {
		v := vector{name: filepath.Base(d)}
		if v.input, err = os.ReadFile(filepath.Join(d, "input.yaml")); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(d, "error")); err == nil {
			line := strings.TrimSpace(strings.TrimPrefix(string(b), "ERROR "))
			v.errKind, v.errText, _ = strings.Cut(line, ": ")
		} else {
			v.expected = readExpected(t, filepath.Join(d, "expected"))
		}
		out = append(out, v)
	}
	return out
}

// outsideSubset lists the vectors whose feature this translator leaves to
// nmstatectl (docs/nmstate.md, "Outside the subset"), with the key path its
// refusal must name. Everything else must match gc exactly.
var outsideSubset = map[string]string{
	"008-order-macvlan-parent":          "interfaces[0].type",
	"009-order-ipvlan-parent-not-moved": "interfaces[0].type",
	"030-v6-duid-uuid":                  "interfaces[0].ipv6.dhcp-duid",
	"032-v6-duid-en":                    "interfaces[0].ipv6.dhcp-duid",
	"114-bridge-group-addr":             "interfaces[0].bridge.options.group-addr",
	"125-ethtool-feature":               "interfaces[0].ethtool.feature",
	"126-ethtool-feature-unsupported":   "interfaces[0].ethtool.feature",
	"128-ethtool-coalesce":              "interfaces[0].ethtool.coalesce",
	"144-iface-team":                    "interfaces[0].type",
	"140-iface-mac-vlan":                "interfaces[1].type",
	"141-iface-mac-vtap":                "interfaces[1].type",
	"145-iface-ipvlan":                  "interfaces[1].type",
	"147-iface-hsr":                     "interfaces[0].type",
	"148-iface-macsec":                  "interfaces[0].type",
	"149-iface-ovs-bridge":              "interfaces[0].type",
}

// TestVectors: every vector inside the subset gives gc's keyfiles byte for
// byte and in gc's order, or gc's error kind; every vector outside it is
// refused as Unsupported, naming the key and pointing at nmstatectl.
func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	accepted, covered := 0, 0
	for _, v := range vs {
		if v.expected != nil {
			accepted++
			if _, out := outsideSubset[v.name]; !out {
				covered++
			}
		}
		t.Run(v.name, func(t *testing.T) { checkVector(t, v) })
	}
	for name := range outsideSubset {
		if !slicesContainsVector(vs, name) {
			t.Errorf("outsideSubset names %s, which is not a vector", name)
		}
	}
	t.Logf("subset covers %d of the %d vectors gc accepts (%.1f%%)", covered, accepted, 100*float64(covered)/float64(accepted))
	if covered*10 < accepted*9 {
		t.Errorf("subset covers %d of %d accepted vectors, below 90%%", covered, accepted)
	}
}

func slicesContainsVector(vs []vector, name string) bool {
	i := sort.Search(len(vs), func(i int) bool { return vs[i].name >= name })
	return i < len(vs) && vs[i].name == name
}

func checkVector(t *testing.T, v vector) {
	got, err := GenerateKeyfiles(v.input)
	if path, out := outsideSubset[v.name]; out {
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindUnsupported || e.Path != path {
			t.Fatalf("want Unsupported at %s, got %v (files %v)", path, err, names(got))
		}
		if !strings.Contains(err.Error(), "nmstatectl") {
			t.Fatalf("refusal %q gives no nmstatectl hint", err)
		}
		return
	}
	if v.expected == nil {
		var e *Error
		if !errors.As(err, &e) || e.Kind != v.errKind {
			t.Fatalf("want %s (%s), got %v (files %v)", v.errKind, v.errText, err, names(got))
		}
		if e.Path == "" {
			t.Fatalf("refusal %q names no key path", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("GenerateKeyfiles: %v", err)
	}
	if len(got) != len(v.expected) {
		t.Fatalf("got files %v, want %v", names(got), names(v.expected))
	}
	for i, want := range v.expected {
		if got[i].Name != want.Name {
			t.Fatalf("files %v, want %v", names(got), names(v.expected))
		}
		if !bytes.Equal(got[i].Content, want.Content) {
			t.Errorf("%s differs\n--- got\n%s--- want\n%s", want.Name, got[i].Content, want.Content)
		}
	}
}
