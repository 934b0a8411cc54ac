// Package statelock serialises the runs that write the agent's state: the
// boot service, the update timer and an admin's --reset-network would
// otherwise interleave writes to the state file, the network manifest and
// the keyfiles (issue 12, item 11). It is one flock(2) on a file in the
// state directory; the kernel drops it when the holder exits, however it
// exits, so a crash never leaves a stale lock. The holder's pid is written
// in the file only to name it in the error of a run that gave up waiting.
// The holder removes the file when it is done, so a run leaves nothing
// behind; a waiter that then wins the lock on the removed file notices and
// locks the path afresh.
package statelock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Name is the lock file's name in the state directory.
const Name = ".nodereg.lock"

// poll is how often a waiting run tries again: flock has no timeout of its
// own, and a blocking flock cannot be interrupted by a context.
const poll = 100 * time.Millisecond

// HeldError: another process kept the lock for the whole wait. Not a
// configuration error: the run can be tried again later (exit 75,
// EX_TEMPFAIL). Exit-code tables match it by type, errors.As(err, &he)
// with he a *HeldError; the agent wraps it in a PhaseError (phase state).
type HeldError struct {
	Path string
	// PID of the holder, 0 when the file does not name one.
	PID    int
	Waited time.Duration
}

// Class: another run holds the lock and will be done later.
func (e *HeldError) Class() errclass.Class { return errclass.Transient }

// Cause names it on the outcome line.
func (e *HeldError) Cause() string { return "state lock held by another run" }

func (e *HeldError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("state lock %s is held by %s; gave up after %s", e.Path, who, e.Waited)
}

// Lock is a held lock.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes the lock at path, waiting at most wait (0: try once) or
// until ctx ends, and writes this process's pid in it.
func Acquire(ctx context.Context, path string, wait time.Duration) (*Lock, error) {
	start := time.Now()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		f, err := open(path)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if current(f, path) {
				if err := writePID(f); err != nil {
					f.Close()
					return nil, fmt.Errorf("state lock %s: %w", path, err)
				}
				return &Lock{f: f, path: path}, nil
			}
			// Locked a file its holder removed on release: try the
			// path again.
			f.Close()
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("state lock %s: %w", path, err)
		}
		pid := holder(f)
		f.Close()
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		held := &HeldError{Path: path, PID: pid, Waited: time.Since(start).Round(time.Millisecond)}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), held)
		}
		return nil, held
	}
}

// current reports whether f is still the file at path.
func current(f *os.File, path string) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	pi, err := os.Lstat(path)
	return err == nil && os.SameFile(fi, pi)
}

// Release removes the lock file, still holding the lock, then drops the
// lock (close unlocks).
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	rmErr := os.Remove(l.path)
	if errors.Is(rmErr, os.ErrNotExist) {
		rmErr = nil
	}
	err := l.f.Close()
	l.f = nil
	return errors.Join(rmErr, err)
}

// open opens (creating) the lock file without following a symlink or
// blocking, and insists on a regular file: a FIFO or a device planted at
// the path is refused, not locked.
func open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("state lock %s: is a symbolic link, not followed", path)
		}
		return nil, fmt.Errorf("state lock: %w", err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("is not a regular file (%s)", fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state lock %s: %w", path, err)
	}
	return f, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holder reads the pid the holder wrote; 0 if none.
func holder(f *os.File) int {
	b := make([]byte, 32)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
