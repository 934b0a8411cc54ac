package vectors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The copy must equal the shared captures wherever those are present.
func TestCopyMatchesSharedVectors(t *testing.T) {
	shared := filepath.Join(ModuleRoot(), "..", "shared", "vectors")
	ents, err := os.ReadDir(shared)
	if err != nil {
		t.Skipf("no shared vectors beside the repository (%v): nothing to compare the copy with", err)
	}
	n := 0
	for _, e := range ents {
		if e.Name() == "README.md" {
			continue
		}
		want, err := os.ReadFile(filepath.Join(shared, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if got := Read(t, e.Name()); !bytes.Equal(got, want) {
			t.Errorf("tests/vectors/%s differs from the shared capture", e.Name())
		}
		n++
	}
	if n == 0 {
		t.Error("shared vectors directory is empty")
	}
}
