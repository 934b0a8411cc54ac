// Package store keeps the reference server's inventories and address claims
// in a bbolt database: one bucket per kind (inventories, claims, hardware),
// one transaction per change, each committed (and synced) before the caller
// acts on it, so a crash at any point neither loses nor reassigns an
// address. A change writes only the records it touched (docs/regserver.md,
// The store).
//
// Inventories and claims are also held in memory, where the registry reads
// them; hardware data (SMBIOS, system data: most of the bytes) is not, it is
// read from the database when asked for.
//
// A store file in the former JSON format is imported once at Open and then
// renamed aside (see Open).
package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// FormatVersion is the database layout, kept in the meta bucket so a later
// layout can migrate.
const FormatVersion = 2

// jsonFormatVersion is the version of the former JSON file, which Open
// imports and Export writes.
const jsonFormatVersion = 1

// Bucket names.
var (
	bucketMeta        = []byte("meta")
	bucketInventories = []byte("inventories")
	bucketClaims      = []byte("claims")
	bucketHardware    = []byte("hardware")
	keyVersion        = []byte("version")
)

// Open.
type Store struct {
	path string
	back backend

	mu    sync.Mutex // state, queue, tickets, last
	state *State
	// queue holds the encoded changes of Updates whose commit is pending,
	// in order; tickets are those Updates, last the newest of them.
	queue   []op
	tickets []*ticket
	last    *ticket
	// commitMu admits one committer at a time; it takes the whole queue,
	// so concurrent registrations share one transaction (group commit).
	commitMu sync.Mutex
	// Imported names the JSON file a legacy store was moved to at Open.
	Imported string
	// CheckPartial: the consistency check at Open ran out of time before
	// it read the whole file.
	CheckPartial bool
	// MetaWarning says that one of the file's two meta pages was damaged
	// and which transaction is served (checkMetas); "" when both read.
	MetaWarning string
	// broken is set (under mu) when memory and database may have parted:
	// a commit failed and the state could not be read back.
	broken error
}

// Open opens the database at path, creating it when missing. An empty path
// keeps the state in memory only (tests, throw-away demos).
//
// An existing file that is empty or `null` is refused: an empty state is
// only ever a new file, and a blanked file would forget every claim. A file
// in the former JSON format is imported into a new database in one
// transaction; the JSON file is then renamed to path+".imported.json" (and
// its hardware directory to path+".imported.hw").
func Open(path string) (*Store, error) { return OpenWith(path, Options{}) }

// Options change how Open treats an existing file.
type Options struct {
	// AcceptOlderTransaction serves a file whose newest meta page is
	// damaged from the older one, losing the last commit (checkMetas).
	AcceptOlderTransaction bool
}

// OpenWith is Open with options.
func OpenWith(path string, o Options) (*Store, error) {
	s := &Store{path: path}
	if path == "" {
		s.back = newMemBackend()
	} else {
		imported, err := importIfJSON(path)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		s.Imported = imported
		_, statErr := os.Stat(path)
		if statErr == nil {
			if s.MetaWarning, err = checkMetas(path, o.AcceptOlderTransaction); err != nil {
				return nil, fmt.Errorf("store %s: %w", path, err)
			}
			// bbolt asserts on a damaged page, and a page pointing back
			// at its parent sends its open's first walk down forever:
			// its pages are read from the file first (checkFile).
			buckets, err := checkFile(path)
			if err == nil {
				err = firstProblem(buckets)
			}
			if err != nil {
				return nil, fmt.Errorf("store %s: %w", path, err)
			}
		}
		back, err := openBolt(path, false)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		s.back = back
		if statErr == nil {
			if s.CheckPartial, err = back.verify(path); err != nil {
				back.close()
				return nil, fmt.Errorf("store %s: %w", path, err)
			}
		}
	}
	st, err := load(s.back)
	if err != nil {
		s.back.close()
		if !errors.Is(err, ErrDamaged) {
			err = fmt.Errorf("%w: %w", ErrDamaged, err)
		}
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	s.state = st
	return s, nil
}

// sniffHead is how much of a file sniff reads to tell a database (which
// starts with a meta page, not blank) from JSON: the whole of a database,
// which can be gigabytes, is never read into memory for that.
const sniffHead = 64 << 10

// sniff classifies an existing store file by its first bytes; data is the
// whole file for JSON only.
func sniff(path string) (kind string, data []byte, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, sniffHead))
	if err != nil {
		return "", nil, err
	}
	if head := bytes.TrimSpace(b); len(b) == sniffHead && (len(head) == 0 || head[0] == '{') {
		// JSON (the import needs all of it), or blank so far: read on.
		rest, err := io.ReadAll(f)
		if err != nil {
			return "", nil, err
		}
		b = append(b, rest...)
	}
	t := bytes.TrimSpace(b)
	switch {
	case len(t) == 0 || string(t) == "null":
		return "", nil, fmt.Errorf("the file exists but holds no state (%d bytes); restore it from a backup or remove it to start empty", len(b))
	case t[0] == '{':
		return "json", b, nil
	}
	return "bolt", nil, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close releases the database; the Store is unusable afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.back.close()
}

// View runs fn with the current state under the lock; fn must not keep
// references past its return nor modify the state.
func (s *Store) View(fn func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.state)
}

// ticket is one Update waiting for its changes to be committed.
type ticket struct {
	done chan struct{}
	err  error
}

// Update runs fn under the lock and returns when what fn recorded through
// the State's methods is committed: nobody acts on a change that is not on
// disk. Concurrent Updates are committed together in one transaction (one
// fsync for a herd of registrations), in the order they ran.
//
// fn should fail before recording changes: what it recorded is committed
// even when it returns an error (memory and disk never part). An Update
// that recorded nothing still waits for the commit of the changes it may
// have read. If a commit fails, the state is reloaded from the database
// and every Update of that commit, and those queued behind it, fail.
// changed is kept for callers' clarity and not needed.
func (s *Store) Update(fn func(*State) (changed bool, err error)) error {
	s.mu.Lock()
	if s.broken != nil {
		// Memory may hold changes the database never took: nothing more
		// is acted on until a restart reads the file again.
		defer s.mu.Unlock()
		return s.broken
	}
	_, ferr := fn(s.state)
	if !s.state.dirty() {
		wait := s.last
		s.mu.Unlock()
		if wait != nil {
			<-wait.done
			if ferr == nil && wait.err != nil {
				return wait.err
			}
		}
		return ferr
	}
	ops, err := s.state.takeOps()
	if err != nil {
		// Nothing was queued: drop the unencodable change by reloading,
		// once the commits already queued (which the state includes) are
		// done.
		s.mu.Unlock()
		return errors.Join(ferr, s.reloadAfter(fmt.Errorf("store %s: %w", s.path, err)))
	}
	t := &ticket{done: make(chan struct{})}
	s.queue = append(s.queue, ops...)
	s.tickets = append(s.tickets, t)
	s.last = t
	s.mu.Unlock()

	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	select {
	case <-t.done: // an earlier committer took our changes
	default:
		s.commitQueue()
	}
	return errors.Join(ferr, t.err)
}

// commitQueue commits everything queued; commitMu is held.
func (s *Store) commitQueue() {
	s.mu.Lock()
	ops, tickets := s.queue, s.tickets
	s.queue, s.tickets = nil, nil
	s.mu.Unlock()
	err := apply(s.back, ops)
	if err != nil {
		err = fmt.Errorf("store %s: %w", s.path, err)
		s.mu.Lock()
		// Changes queued since were made on the state that just failed.
		tickets = append(tickets, s.tickets...)
		s.queue, s.tickets, s.last = nil, nil, nil
		if st, lerr := load(s.back); lerr == nil {
			s.state = st
		} else {
			err = errors.Join(err, fmt.Errorf("store %s: reloading after a failed commit: %w", s.path, lerr))
			s.broken = fmt.Errorf("store %s: no change is accepted after a failed commit the state could not be reloaded from (restart regserver): %w", s.path, err)
		}
		s.mu.Unlock()
	}
	for _, t := range tickets {
		t.err = err
		close(t.done)
	}
}

// reloadAfter commits what is queued, then reloads the state from the
// database, dropping changes that were never queued; it returns cause.
func (s *Store) reloadAfter(cause error) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.commitQueue()
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := load(s.back)
	if err != nil {
		err = errors.Join(cause, err)
		s.broken = fmt.Errorf("store %s: no change is accepted after the state could not be reloaded (restart regserver): %w", s.path, err)
		return err
	}
	s.state = st
	return cause
}

// Hardware reads a machine's hardware data from the database.
func (s *Store) Hardware(hash string) (Hardware, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Hardware(hash)
}

// Size is the database's size in bytes (0 for a memory store).
func (s *Store) Size() int64 {
	if fi, err := os.Stat(s.path); err == nil && s.path != "" {
		return fi.Size()
	}
	return 0
}
