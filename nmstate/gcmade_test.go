package nmstate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGCMade: the states in testdata/gcmade, each with what nmstate's own
// gen_conf (MatchedCommit, built here as testdata/gcmade/README.md says)
// made of it. Where gc writes something NetworkManager drops, the case
// also has builtin-refuses ("<Kind> <key path>"): this translator refuses
// it there; every other case must give gc's bytes, order, or error kind.
func TestGCMade(t *testing.T) {
	dirs, err := filepath.Glob("testdata/gcmade/[0-9]*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("gc-made cases missing: %v", err)
	}
	for _, d := range dirs {
		t.Run(filepath.Base(d), func(t *testing.T) {
			v := vector{name: filepath.Base(d)}
			if v.input, err = os.ReadFile(filepath.Join(d, "input.yaml")); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(d, "builtin-refuses")); err == nil {
				readExpected(t, filepath.Join(d, "expected")) // gc accepts it
				kind, path, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
				_, err := GenerateKeyfiles(v.input)
				var e *Error
				if !errors.As(err, &e) || e.Kind != kind || e.Path != path {
					t.Fatalf("want %s at %s, got %v", kind, path, err)
				}
				return
			}
			if b, err := os.ReadFile(filepath.Join(d, "error")); err == nil {
				line := strings.TrimSpace(strings.TrimPrefix(string(b), "ERROR "))
				v.errKind, v.errText, _ = strings.Cut(line, ": ")
			} else {
				v.expected = readExpected(t, filepath.Join(d, "expected"))
			}
			checkVector(t, v)
		})
	}
}
