package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/netpolicy"
)

// TestOneProfileAcceptsWhatGCWrites: no keyfile set nmstate's own gc wrote
// (the shared vectors and the gc-made cases, all in nmstate/testdata) gives
// one device two profiles, so rule one-profile-per-device refuses nothing
// the translators write for a valid state.
func TestOneProfileAcceptsWhatGCWrites(t *testing.T) {
	var files []string
	for _, g := range []string{"../nmstate/testdata/vectors/*/expected", "../nmstate/testdata/gcmade/*/expected"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 140 {
		t.Fatalf("found %d gc outputs, want the vectors", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var kfs []netpolicy.Keyfile
		for _, block := range strings.Split(string(b), "=== END\n") {
			head, body, ok := strings.Cut(block, "\n")
			if name, isHead := strings.CutPrefix(head, "=== "); ok && isHead {
				kfs = append(kfs, netpolicy.Keyfile{Label: name, Name: name, Content: []byte(body)})
			}
		}
		if len(kfs) == 0 {
			t.Fatalf("%s: no keyfile read", f)
		}
		if err := netpolicy.CheckOneProfile(kfs); err != nil {
			t.Errorf("%s: %v", filepath.Base(filepath.Dir(f)), err)
		}
	}
}
