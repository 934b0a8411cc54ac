package host

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// countingFS counts what reaches the FS below a snapshot.
type countingFS struct {
	FS
	mu sync.Mutex
	n  map[string]int
}

func (c *countingFS) count(op, p string) {
	c.mu.Lock()
	c.n[op+" "+p]++
	c.mu.Unlock()
}

func (c *countingFS) ReadFile(p string, limit int64) ([]byte, error) {
	c.count("read", p)
	return c.FS.ReadFile(p, limit)
}

func (c *countingFS) ReadDir(p string) ([]fs.DirEntry, error) {
	c.count("readdir", p)
	return c.FS.ReadDir(p)
}

func TestSnapshotReadsEachFileOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dev"), []byte("8:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	below := &countingFS{FS: Root(dir), n: map[string]int{}}
	s := NewSnapshot(below)
	if NewSnapshot(s) != s {
		t.Error("a snapshot of a snapshot is a second pass")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			b, err := s.ReadFile("/dev", MaxAttr)
			if err != nil || string(b) != "8:0\n" {
				t.Errorf("read %q, %v", b, err)
			}
			b[0] = 'X' // a reader's copy, not the snapshot's
			if _, err := s.ReadFile("/missing", MaxAttr); !os.IsNotExist(err) {
				t.Errorf("missing file: %v", err)
			}
			if _, err := s.ReadDir("//"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, _ := s.ReadFile("/dev", MaxAttr); string(b) != "8:0\n" {
		t.Errorf("a reader changed the snapshot: %q", b)
	}
	want := map[string]int{"read /dev": 1, "read /missing": 1, "readdir //": 1}
	for k, n := range below.n {
		if n != want[k] {
			t.Errorf("%s: %d reads below the snapshot, want %d", k, n, want[k])
		}
	}
	if len(below.n) != len(want) {
		t.Errorf("reads below: %v, want %v", below.n, want)
	}
}
