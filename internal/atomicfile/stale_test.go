package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	// A temp file as a Write killed before its rename leaves it.
	f, err := os.CreateTemp(dir, TempPattern)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	keep := []string{".nodereg-lock.tmp", ".nodereg-.tmp", "x.nodereg-1.tmp", ".nodereg-12.tmp.yaml", "state.yaml"}
	for _, n := range keep {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".nodereg-77.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveStale(dir)
	if err != nil || !slices.Equal(removed, []string{f.Name()}) {
		t.Fatalf("removed %v, %v; want only %s", removed, err, f.Name())
	}
	for _, n := range append(keep, ".nodereg-77.tmp") {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if r, err := RemoveStale(filepath.Join(dir, "missing")); err != nil || r != nil {
		t.Errorf("missing dir: %v %v", r, err)
	}
}
