// Package host is the agent's one edge to the machine it runs on: the
// files below --root (read without following a planted link, written
// atomically), the programs it runs, and the table of both (Tools, the
// paths in paths.go). Everything else takes a FS and a Runner as values and
// names host paths ("/oem/..."), never the root: tests and image builds run
// with a scratch root, the node with "/", and a dry run swaps in Print and
// PrintRunner (docs/architecture.md, "Where side effects live").
package host

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/internal/safefile"
)

// FS is the host's file system below the root. Every path is a host path;
// Path maps one to where it is on this machine, for a message or a
// program's argument.
type FS interface {
	// Path is p below the root: the one place that join lives. It is
	// the lexical join, for a message or a program's argument; every
	// method below resolves p inside the root instead (InRoot), so a
	// symlink on the way never leads out of it.
	Path(p string) string
	// InRoot is p on this machine with every symlink on the way resolved
	// below the root as openat2's RESOLVE_IN_ROOT does, but the last
	// component, which the reader looks at itself (safefile refuses a
	// link there): for a reader outside FS (a CA file handed to the TLS
	// config). The host itself ("/") resolves nothing.
	InRoot(p string) (string, error)
	// ReadFile reads a regular file of at most limit bytes without
	// following a symlink in its last component (safefile.ReadFile).
	ReadFile(p string, limit int64) ([]byte, error)
	// ReadDir lists a directory, sorted by name; one of more than
	// MaxDirEntries entries is an error, not a partial list.
	ReadDir(p string) ([]fs.DirEntry, error)
	// Readlink is the target of the symlink p (sysfs' links name the bus
	// and driver of a device).
	Readlink(p string) (string, error)
	// Open opens a regular file as ReadFile does, for a reader that ends
	// in an error past limit bytes (a stream too large to hold whole).
	Open(p string, limit int64) (io.ReadCloser, error)
	// OpenDevice opens a character device for reading and writing (the
	// TPM); anything else is refused before a byte is written.
	OpenDevice(p string) (io.ReadWriteCloser, error)
	// Lstat describes p without following a final symlink; Stat follows.
	Lstat(p string) (fs.FileInfo, error)
	Stat(p string) (fs.FileInfo, error)
	// WriteFile replaces p atomically (parent directories exist).
	WriteFile(p string, data []byte, perm fs.FileMode) error
	// Remove removes p; a missing file is not an error.
	Remove(p string) error
	// MkdirAll creates a directory and its parents, durably (the
	// parent of each one created is synced).
	MkdirAll(p string, perm fs.FileMode) error
	// Lock takes the inter-process lock file p, waiting at most wait for
	// another holder (statelock); release gives it back.
	Lock(ctx context.Context, p string, wait time.Duration) (release func() error, err error)
	// RemoveStale removes the temp files an interrupted WriteFile left in
	// directory p and returns where they were; the caller holds the lock.
	RemoveStale(p string) ([]string, error)
	// SetAside keeps a file that cannot be parsed under a new name
	// (<path>.corrupt-<unix time>) and says which; it never removes one.
	SetAside(p string) (string, error)
}

// Root is the real file system below a root directory ("" or "/": the
// host itself); writes are atomic (temp file, fsync, rename).
type Root string

// Path implements FS. Root "" or "/" is the host itself, where a relative
// p stays relative to the working directory (a --config given as
// ./config.yaml). Below a root, p is taken from the root's "/", so ".."
// cannot climb out of it.
func (r Root) Path(p string) string {
	p = filepath.FromSlash(p)
	if r == "" || r == "/" {
		return filepath.Clean(p)
	}
	return filepath.Join(string(r), filepath.Clean("/"+p))
}

// ReadFile implements FS.
func (r Root) ReadFile(p string, limit int64) ([]byte, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return nil, err
	}
	return safefile.ReadFile(name, limit)
}

// Lstat implements FS.
func (r Root) Lstat(p string) (fs.FileInfo, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return nil, err
	}
	return os.Lstat(name)
}

// Stat implements FS.
func (r Root) Stat(p string) (fs.FileInfo, error) {
	name, err := r.inRoot(p, true)
	if err != nil {
		return nil, err
	}
	return os.Stat(name)
}

// WriteFile implements FS.
func (r Root) WriteFile(p string, data []byte, perm fs.FileMode) error {
	name, err := r.inRoot(p, false)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(name, data, perm); err != nil {
		return err
	}
	durable("write", p, data, perm)
	return nil
}

// Remove implements FS.
func (r Root) Remove(p string) error {
	name, err := r.inRoot(p, false)
	if err != nil {
		return err
	}
	if err := atomicfile.Remove(name); err != nil {
		return err
	}
	durable("remove", p, nil, 0)
	return nil
}

// MkdirAll implements FS.
func (r Root) MkdirAll(p string, perm fs.FileMode) error {
	name, err := r.inRoot(p, true)
	if err != nil {
		return err
	}
	if err := atomicfile.MkdirAll(name, perm); err != nil {
		return err
	}
	durable("mkdir", p, nil, perm)
	return nil
}

// SetAside implements FS.
func (r Root) SetAside(p string) (string, error) {
	name, err := r.inRoot(p, false)
	if err != nil {
		return "", err
	}
	aside, err := safefile.SetAside(name, time.Now())
	if err == nil {
		durable("aside", p, []byte(aside), 0)
	}
	return aside, err
}

// Print is a dry run's FS: it reads through Root and prints what would be
// written or removed, content included, touching nothing.
type Print struct {
	Root
	W io.Writer
}

// WriteFile implements FS.
func (p Print) WriteFile(path string, data []byte, perm fs.FileMode) error {
	fmt.Fprintf(p.W, "# ---- would write %s (%04o)\n", p.Path(path), perm)
	p.W.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		fmt.Fprintln(p.W)
	}
	return nil
}

// Remove implements FS.
func (p Print) Remove(path string) error {
	fmt.Fprintf(p.W, "# would remove %s\n", p.Path(path))
	return nil
}

// MkdirAll implements FS: directories are implied by the files.
func (Print) MkdirAll(string, fs.FileMode) error { return nil }

// RemoveStale implements FS: a dry run removes nothing.
func (Print) RemoveStale(string) ([]string, error) { return nil, nil }

// SetAside implements FS: it says what a run would do and leaves the file
// where it is.
func (p Print) SetAside(path string) (string, error) {
	h := p.Path(path)
	fmt.Fprintf(p.W, "# would keep %s aside as %s.corrupt-<time>\n", h, h)
	return "(not in a dry run)", nil
}
