package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.yaml")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Errorf("content %q mode %v", b, st.Mode())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("old"), 0o644)
	// A directory where the file should go cannot be replaced by rename.
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "keep"), nil, 0o644)
	if err := Write(sub, []byte("x"), 0o600); err == nil {
		t.Error("replacing a non-empty directory succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("old file changed: %q", b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if ok, _ := filepath.Match(TempPattern, e.Name()); ok {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}

func TestMkdirAllCreatesParents(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		st, err := os.Stat(filepath.Join(root, d))
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, st, err)
		}
	}
	// Existing: nothing to do, no error; a file in the way: an error.
	if err := MkdirAll(p, 0o700); err != nil {
		t.Error(err)
	}
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(f, "sub"), 0o700); err == nil {
		t.Error("MkdirAll under a regular file succeeded")
	}
}
