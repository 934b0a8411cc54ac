package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/internal/safefile"
	"github.com/nodereg/nodereg/internal/statelock"
)

// MaxDirEntries bounds a directory listing: far above the NICs, DRM cards
// or temp files of a real machine, and a tree that has more is broken or
// hostile, not something to walk.
const MaxDirEntries = 1 << 14

// ErrTooManyEntries: a directory holds more than MaxDirEntries entries.
var ErrTooManyEntries = fmt.Errorf("holds more than %d entries", MaxDirEntries)

// dirLimit is MaxDirEntries, lowered by a test rather than made to create
// sixteen thousand files.
var dirLimit = MaxDirEntries

// Live says whether files is the host itself rather than a tree below a
// scratch root: the one test of it, so that "live" means the same to the
// inventory (live interface addresses, dmidecode), the bootstrap facts
// (the kernel's permanent MAC) and the command line (--apply-live).
func Live(files FS) bool { return files.Path("/") == "/" }

// ReadDir implements FS.
func (r Root) ReadDir(p string) ([]fs.DirEntry, error) {
	name, err := r.inRoot(p, true)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(dirLimit + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > dirLimit {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: ErrTooManyEntries}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return entries, nil
}

// Readlink implements FS.
func (r Root) Readlink(p string) (string, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return "", err
	}
	return os.Readlink(name)
}

// Open implements FS.
func (r Root) Open(p string, limit int64) (io.ReadCloser, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return nil, err
	}
	f, err := safefile.Open(name)
	if err != nil {
		return nil, err
	}
	return &limited{f: f, r: io.LimitReader(f, limit+1), left: limit, path: name}, nil
}

// limited reads a file up to its limit and fails past it, so a stream
// that is cut short cannot pass for a complete one.
type limited struct {
	f    *os.File
	r    io.Reader
	left int64
	path string
}

func (l *limited) Read(b []byte) (int, error) {
	n, err := l.r.Read(b)
	l.left -= int64(n)
	if l.left < 0 {
		return n, &fs.PathError{Op: "read", Path: l.path, Err: safefile.ErrTooLarge}
	}
	return n, err
}

func (l *limited) Close() error { return l.f.Close() }

// OpenDevice implements FS. The type is looked at before the open (opening
// a FIFO would wait for a writer) and checked again on the opened file, so
// a swap in between changes nothing and no command goes to a disk.
func (r Root) OpenDevice(p string) (io.ReadWriteCloser, error) {
	name, err := r.inRoot(p, true)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(name); err != nil {
		return nil, err
	} else if err := charDevice(name, fi); err != nil {
		return nil, err
	}
	return safefile.OpenAs(name, os.O_RDWR, charDevice)
}

// ErrNotDevice: OpenDevice was given something other than a character
// device.
var ErrNotDevice = errors.New("is not a character device")

func charDevice(name string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeCharDevice != 0 {
		return nil
	}
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (it is %s)", ErrNotDevice, safefile.Kind(fi.Mode()))}
}

// Lock implements FS.
func (r Root) Lock(ctx context.Context, p string, wait time.Duration) (func() error, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return nil, err
	}
	l, err := statelock.Acquire(ctx, name, wait)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// RemoveStale implements FS.
func (r Root) RemoveStale(p string) ([]string, error) {
	name, err := r.inRoot(p, true)
	if err != nil {
		return nil, err
	}
	return atomicfile.RemoveStale(name)
}

// TempDir makes a private directory on this machine for a program's
// scratch files (nm-configurator's input and output), as an FS of its own,
// and the function that removes it with all it holds.
func TempDir(pattern string) (Root, func(), error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return Root(dir), func() { _ = os.RemoveAll(dir) }, nil
}

// Walk calls fn for every entry below directory p in lexical order, depth
// first, with its host path; a symlink is reported, never followed. An
// unreadable directory ends the walk with its error.
func Walk(files FS, p string, fn func(p string, d fs.DirEntry) error) error {
	entries, err := files.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		child := path.Join(p, e.Name())
		if err := fn(child, e); err != nil {
			return err
		}
		if e.IsDir() {
			if err := Walk(files, child, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadPEM reads a PEM file (a CA bundle) of at most safefile.MaxPEM bytes
// holding at least one block, as ReadFile reads.
func ReadPEM(files FS, p string) ([]byte, error) {
	name, err := files.InRoot(p)
	if err != nil {
		return nil, err
	}
	return safefile.ReadPEM(name)
}

// ReadInput reads a file an operator names on the command line (render's
// --input) as os.Open does: a link is followed and a pipe is a file
// (render -f /dev/stdin); more than limit bytes is an error. It is never a
// host path the agent reads state from: those go through FS.
func ReadInput(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%w (%d bytes)", safefile.ErrTooLarge, limit)}
	}
	return b, nil
}

// MaxAttr bounds one sysfs or procfs attribute file (a page at most).
const MaxAttr = 64 << 10

// ReadAttr is a small attribute file's text, trimmed; "" when it cannot be
// read (sysfs leaves out what a driver does not have).
func ReadAttr(files FS, p string) string {
	b, err := files.ReadFile(p, MaxAttr)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
