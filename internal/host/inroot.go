package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks is how many symlinks one resolution follows before it fails
// with ELOOP, the kernel's own bound (MAXSYMLINKS).
const maxLinks = 40

// inRoot is host path p on this machine, resolved below r as openat2's
// RESOLVE_IN_ROOT resolves it: each symlink on the way is followed with r
// as "/" (an absolute target starts again at r, ".." stops at r), so the
// path it returns lies below r, with no link left in it but perhaps the
// last component, whatever links the tree holds. Joining under r alone
// (Path) let the kernel follow an intermediate link out of the root
// (R/oem -> /oem). last: the last component is resolved too (Stat, ReadDir,
// a directory to create in); otherwise it is left for the caller, which
// looks at the link itself (Lstat, safefile's O_NOFOLLOW reads, a rename
// over it). Root "" or "/" is the host itself: nothing to confine, p is
// taken as Path takes it.
//
// The components are checked one by one (Lstat, Readlink), so a tree that
// another user may change while the run goes can still race it; the trees
// the agent trusts (the config's drop-ins) must be root's
// (agent/localconfig).
func (r Root) inRoot(p string, last bool) (string, error) {
	if r == "" || r == "/" {
		return r.Path(p), nil
	}
	root := filepath.Clean(string(r))
	var done []string // components below root, each a real directory but perhaps the last
	todo := components(filepath.Clean("/" + filepath.FromSlash(p)))
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch {
		case c == "." || c == "":
			continue
		case c == "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		case len(todo) == 0 && !last:
			done = append(done, c)
			continue
		}
		// Every component is a plain name here (no "", ".", ".." or
		// "/"), so the join needs no cleaning; filepath.Join cleaned the
		// whole path again at every step of every read below a root.
		at := root + string(filepath.Separator) + strings.Join(append(done, c), string(filepath.Separator))
		fi, err := os.Lstat(at)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			// Nothing below a missing entry exists: the rest is taken as
			// written (a file or directories to create), ".." kept below
			// the root.
			done = append(done, c)
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: r.Path(p), Err: syscall.ELOOP}
		}
		target, err := os.Readlink(at)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(components(target), todo...)
	}
	return filepath.Join(root, filepath.Join(done...)), nil
}

func components(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// InRoot implements FS.
func (r Root) InRoot(p string) (string, error) { return r.inRoot(p, false) }
