package host

import (
	"io/fs"
	"path"
	"slices"
	"sync"
)

// Snapshot is one pass over a read-only tree (sysfs, procfs, the udev
// database) that several readers share: each file, directory listing,
// link and stat is asked of the FS below once, and every later ask gets
// the first answer, data or error. The inventory's families read many
// of the same files (a disk's dev number and its udev record, once per
// property, /proc/meminfo once per field); through a snapshot each is
// read once per run, and concurrent readers wait for the one read.
//
// Everything else (Path, InRoot, Open, writes) goes to the FS below
// unchanged: a snapshot is for files read whole and small, never for
// state the run writes.
type Snapshot struct {
	FS

	mu      sync.Mutex
	entries map[snapKey]*snapEntry
}

type snapOp uint8

const (
	snapRead snapOp = iota
	snapDir
	snapLink
	snapStat
	snapLstat
)

// snapKey names one answer; a file read with two limits is two answers,
// as the second may be cut where the first was not.
type snapKey struct {
	op    snapOp
	path  string
	limit int64
}

type snapEntry struct {
	once sync.Once
	data []byte
	dir  []fs.DirEntry
	link string
	fi   fs.FileInfo
	err  error
}

// NewSnapshot starts an empty snapshot of files; files that is already
// one is returned as it is, so that a caller's snapshot is shared.
func NewSnapshot(files FS) *Snapshot {
	if s, ok := files.(*Snapshot); ok {
		return s
	}
	return &Snapshot{FS: files, entries: map[snapKey]*snapEntry{}}
}

func (s *Snapshot) entry(op snapOp, p string, limit int64, fill func(*snapEntry)) *snapEntry {
	k := snapKey{op: op, path: path.Clean("/" + p), limit: limit}
	s.mu.Lock()
	e, ok := s.entries[k]
	if !ok {
		e = &snapEntry{}
		s.entries[k] = e
	}
	s.mu.Unlock()
	e.once.Do(func() { fill(e) })
	return e
}

// ReadFile implements FS: the first read's bytes, a copy each time.
func (s *Snapshot) ReadFile(p string, limit int64) ([]byte, error) {
	e := s.entry(snapRead, p, limit, func(e *snapEntry) { e.data, e.err = s.FS.ReadFile(p, limit) })
	return slices.Clone(e.data), e.err
}

// ReadDir implements FS.
func (s *Snapshot) ReadDir(p string) ([]fs.DirEntry, error) {
	e := s.entry(snapDir, p, 0, func(e *snapEntry) { e.dir, e.err = s.FS.ReadDir(p) })
	return slices.Clone(e.dir), e.err
}

// Readlink implements FS.
func (s *Snapshot) Readlink(p string) (string, error) {
	e := s.entry(snapLink, p, 0, func(e *snapEntry) { e.link, e.err = s.FS.Readlink(p) })
	return e.link, e.err
}

// Stat implements FS.
func (s *Snapshot) Stat(p string) (fs.FileInfo, error) {
	e := s.entry(snapStat, p, 0, func(e *snapEntry) { e.fi, e.err = s.FS.Stat(p) })
	return e.fi, e.err
}

// Lstat implements FS.
func (s *Snapshot) Lstat(p string) (fs.FileInfo, error) {
	e := s.entry(snapLstat, p, 0, func(e *snapEntry) { e.fi, e.err = s.FS.Lstat(p) })
	return e.fi, e.err
}
