package apply

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/internal/safefile"
)

// Files is the edge where the agent writes on the host: every file it
// writes or removes goes through one. Paths are host paths below the root.
type Files interface {
	// WriteFile replaces path atomically (parent directories exist).
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// Remove removes path; a missing file is not an error.
	Remove(path string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string, perm fs.FileMode) error
	// SetAside keeps a file that cannot be parsed under a new name
	// (<path>.corrupt-<unix time>) and says which; it never removes one.
	SetAside(path string) (string, error)
}

// HostFiles writes the real files: atomically (temp file, fsync, rename).
type HostFiles struct{}

// WriteFile implements Files.
func (HostFiles) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return atomicfile.Write(path, data, perm)
}

// Remove implements Files.
func (HostFiles) Remove(path string) error { return atomicfile.Remove(path) }

// MkdirAll implements Files.
func (HostFiles) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// SetAside implements Files.
func (HostFiles) SetAside(path string) (string, error) { return safefile.SetAside(path, time.Now()) }

// PrintFiles is a dry run's Files: it prints what would be written or
// removed, content included, and touches nothing.
type PrintFiles struct{ W io.Writer }

// WriteFile implements Files.
func (p PrintFiles) WriteFile(path string, data []byte, perm fs.FileMode) error {
	fmt.Fprintf(p.W, "# ---- would write %s (%04o)\n", path, perm)
	p.W.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		fmt.Fprintln(p.W)
	}
	return nil
}

// Remove implements Files.
func (p PrintFiles) Remove(path string) error {
	fmt.Fprintf(p.W, "# would remove %s\n", path)
	return nil
}

// MkdirAll implements Files: directories are implied by the files.
func (PrintFiles) MkdirAll(string, fs.FileMode) error { return nil }

// SetAside implements Files: it says what a run would do and leaves the
// file where it is.
func (p PrintFiles) SetAside(path string) (string, error) {
	fmt.Fprintf(p.W, "# would keep %s aside as %s.corrupt-<time>\n", path, path)
	return "(not in a dry run)", nil
}
