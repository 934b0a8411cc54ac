// Package safefile reads files in places another process could have
// planted something: without following a symbolic link, without blocking on
// a FIFO or a device, and never more than a given size. The agent runs as
// root at boot; a FIFO at a path it reads would hold it for ever, a symlink
// would make it read (and later replace) a file it does not own, and
// /dev/zero would grow it without end (docs/reliability.md, "Hostile
// server").
package safefile

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/atomicfile"
)

var (
	// ErrSymlink: the path is a symbolic link, which is not followed.
	ErrSymlink = errors.New("is a symbolic link, not followed")
	// ErrNotRegular: the path is a FIFO, a socket, a device or a directory.
	ErrNotRegular = errors.New("is not a regular file")
	// ErrTooLarge: the file holds more than the caller allows.
	ErrTooLarge = errors.New("is larger than allowed")
)

// Open opens path for reading if it is a regular file. The last component
// is not followed if it is a symlink, and the open does not wait for a FIFO
// writer; the type is checked on the opened file, so a swap between check
// and open changes nothing. Errors are *fs.PathError: a missing file still
// matches fs.ErrNotExist.
func Open(path string) (*os.File, error) {
	// Refuse what is visibly wrong before opening: opening some devices
	// has effects of its own.
	if fi, err := os.Lstat(path); err != nil {
		return nil, err
	} else if err := regular(path, fi); err != nil {
		return nil, err
	}
	return openChecked(path)
}

// openChecked is Open without the early look: the type is checked on the
// opened file only.
func openChecked(path string) (*os.File, error) {
	return OpenAs(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, regular)
}

// OpenAs opens path with flag and hands the opened file's type to check,
// closing the file when check refuses it: the check is on what was opened,
// so a swap after an earlier look changes nothing. With O_NOFOLLOW a
// symlink at path is ErrSymlink.
func OpenAs(path string, flag int, check func(path string, fi fs.FileInfo) error) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		if flag&syscall.O_NOFOLLOW != 0 && errors.Is(err, syscall.ELOOP) {
			return nil, &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = check(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func regular(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m&fs.ModeSymlink != 0:
		return &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, Kind(m))}
}

// Kind names a file's type for an error message ("a FIFO", "a block
// device").
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "mode " + m.String()
}

// ReadFile reads path as Open does, refusing one of more than limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tooLarge := &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, limit)}
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, tooLarge
	}
	// The size can change after the stat: read one byte more than allowed
	// to tell.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, tooLarge
	}
	return b, nil
}

// MaxPEM bounds a CA bundle: a few dozen certificates, far below it.
const MaxPEM = 1 << 20

// ErrNoPEM: the text holds no PEM block.
var ErrNoPEM = errors.New("holds no PEM block")

// ReadPEM reads a PEM file (a CA bundle) of at most MaxPEM bytes that
// holds at least one PEM block.
func ReadPEM(path string) ([]byte, error) {
	b, err := ReadFile(path, MaxPEM)
	if err != nil {
		return nil, err
	}
	if err := CheckPEM(b); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

// CheckPEM accepts PEM text of at most MaxPEM bytes with at least one block.
func CheckPEM(b []byte) error {
	if len(b) > MaxPEM {
		return fmt.Errorf("PEM text %w (%d bytes)", ErrTooLarge, MaxPEM)
	}
	if blk, _ := pem.Decode(b); blk == nil {
		return ErrNoPEM
	}
	return nil
}

// maxAsideNames bounds the counter SetAside tries: a directory holding a
// thousand set-aside copies of one file needs a person, not another name.
const maxAsideNames = 1000

// SetAside renames a file the agent cannot parse to
// <path>.corrupt-<unix time> in the same directory, so the run can start
// afresh while a person can still look at what was there; it returns the
// new name. Nothing is removed or replaced: a name already taken (also one
// created while we look) gets a counter, up to maxAsideNames.
func SetAside(path string, now time.Time) (string, error) {
	base := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
	for i := range maxAsideNames {
		aside := base
		if i > 0 {
			aside = fmt.Sprintf("%s.%d", base, i)
		}
		err := renameNoReplace(path, aside)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("setting %s aside: %w", path, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil {
			return aside, fmt.Errorf("setting %s aside: %w", path, err)
		}
		return aside, nil
	}
	return "", fmt.Errorf("setting %s aside: %s and %d numbered names %w", path, base, maxAsideNames-1, fs.ErrExist)
}

// renameNoReplace renames from to to, failing with fs.ErrExist if to
// exists, in one step: a check before a plain rename would let a file
// created in between be overwritten.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		// Filesystems without RENAME_NOREPLACE (and old kernels) refuse
		// the flag; a hard link is just as exclusive.
		return linkNoReplace(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// linkNoReplace renames by linking to the new name, which fails if it is
// taken, then removing the old one.
func linkNoReplace(from, to string) error {
	if err := os.Link(from, to); err != nil {
		return err
	}
	return os.Remove(from)
}
