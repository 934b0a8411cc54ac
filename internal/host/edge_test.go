package host

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/safefile"
)

func TestLive(t *testing.T) {
	scratch := Root(t.TempDir())
	live := map[FS]bool{Root(""): true, Root("/"): true, Print{Root: "/"}: true, scratch: false, Print{Root: scratch}: false}
	for files, want := range live {
		if Live(files) != want {
			t.Errorf("Live(%#v) is not %v", files, want)
		}
	}
}

// The reads the inventory and the TPM need, each bounded and each refusing
// what is not the kind of file asked for.
func TestRootReadsAreBounded(t *testing.T) {
	dir := t.TempDir()
	r := Root(dir)
	must(t, os.MkdirAll(filepath.Join(dir, "sys/class/net/eth0"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 100), 0o600))
	must(t, os.Symlink("../../devices/virtual/net/br0", filepath.Join(dir, "sys/class/net/br0")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))

	if dest, err := r.Readlink("/sys/class/net/br0"); err != nil || dest != "../../devices/virtual/net/br0" {
		t.Errorf("Readlink = %q, %v", dest, err)
	}
	f, err := r.Open("/big", 10)
	must(t, err)
	if _, err := io.ReadAll(f); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("reading 100 bytes through Open(limit 10): %v, want ErrTooLarge", err)
	}
	f.Close()
	if f, err := r.Open("/big", 100); err != nil {
		t.Error(err)
	} else if b, err := io.ReadAll(f); err != nil || len(b) != 100 {
		t.Errorf("Open at its limit: %d bytes, %v", len(b), err)
	}
	if _, err := r.Open("/sys/class/net/br0", 10); err == nil {
		t.Error("Open followed a symlink")
	}
	if _, err := r.OpenDevice("/big"); !errors.Is(err, ErrNotDevice) {
		t.Errorf("OpenDevice on a regular file: %v, want ErrNotDevice", err)
	}
	// A FIFO is refused before the open, which would wait for a writer.
	if _, err := r.OpenDevice("/fifo"); !errors.Is(err, ErrNotDevice) {
		t.Errorf("OpenDevice on a FIFO: %v, want ErrNotDevice", err)
	}
	if d, err := r.OpenDevice("/dev/null"); err == nil {
		d.Close()
		t.Error("OpenDevice left the root")
	}
	if d, err := Root("").OpenDevice("/dev/null"); err != nil {
		t.Errorf("OpenDevice(/dev/null): %v", err)
	} else {
		d.Close()
	}
}

func TestReadDirIsBounded(t *testing.T) {
	defer func(n int) { dirLimit = n }(dirLimit)
	dirLimit = 11
	dir := t.TempDir()
	for i := 0; i <= dirLimit; i++ {
		must(t, os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o600))
	}
	if _, err := Root(dir).ReadDir("/"); !errors.Is(err, ErrTooManyEntries) {
		t.Errorf("ReadDir of %d entries: %v, want ErrTooManyEntries", dirLimit+1, err)
	}
	must(t, os.Remove(filepath.Join(dir, "0")))
	entries, err := Root(dir).ReadDir("/")
	if err != nil || len(entries) != dirLimit || entries[0].Name() != "1" || entries[1].Name() != "10" {
		t.Errorf("ReadDir of %d entries: %d, %v (want them sorted)", dirLimit, len(entries), err)
	}
}

func TestLockAndRemoveStale(t *testing.T) {
	dir := t.TempDir()
	r := Root(dir)
	release, err := r.Lock(context.Background(), "/state.lock", time.Second)
	must(t, err)
	if _, err := r.Lock(context.Background(), "/state.lock", 0); err == nil {
		t.Fatal("a second Lock got a held lock")
	}
	must(t, release())
	stale := filepath.Join(dir, ".nodereg-123.tmp")
	must(t, os.WriteFile(stale, nil, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "keep"), nil, 0o600))
	if removed, err := (Print{Root: r}).RemoveStale("/"); err != nil || len(removed) != 0 {
		t.Errorf("a dry run removed %v, %v", removed, err)
	}
	removed, err := r.RemoveStale("/")
	if err != nil || len(removed) != 1 || removed[0] != stale {
		t.Errorf("RemoveStale = %v, %v; want [%s]", removed, err, stale)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Errorf("RemoveStale took a file it does not own: %v", err)
	}
}

func TestWalkAndTempDir(t *testing.T) {
	tmp, remove, err := TempDir("nodereg-test-")
	must(t, err)
	must(t, tmp.MkdirAll("/out/host1", 0o700))
	must(t, tmp.WriteFile("/out/host1/a.nmconnection", []byte("x"), 0o600))
	must(t, tmp.WriteFile("/out/b", []byte("y"), 0o600))
	must(t, os.Symlink("/etc", tmp.Path("/out/link")))
	var seen []string
	must(t, Walk(tmp, "/out", func(p string, d fs.DirEntry) error {
		seen = append(seen, p)
		return nil
	}))
	want := []string{"/out/b", "/out/host1", "/out/host1/a.nmconnection", "/out/link"}
	if len(seen) != len(want) {
		t.Fatalf("Walk saw %v, want %v (a symlink is not followed)", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("Walk saw %v, want %v", seen, want)
		}
	}
	remove()
	if _, err := os.Stat(string(tmp)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("TempDir's remove left %s: %v", tmp, err)
	}
}

func TestReadInput(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in.yaml")
	must(t, os.WriteFile(p, []byte("12345"), 0o600))
	if b, err := ReadInput(p, 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadInput = %q, %v", b, err)
	}
	if _, err := ReadInput(p, 4); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("ReadInput past its limit: %v, want ErrTooLarge", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
