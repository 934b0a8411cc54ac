// Package store keeps the reference server's inventories and address claims
// in a bbolt database: one bucket per kind (inventories, claims, hardware),
// one transaction per change, each committed (and synced) before the caller
// acts on it, so a crash at any point neither loses nor reassigns an
// address. A change writes only the records it touched.
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
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nodereg/nodereg/protocol"
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

// State is what the registry works on under the store's lock: inventories
// and claims, without hardware data. Changes must go through its methods,
// which remember what to write with the transaction.
type State struct {
	// Inventories by identity hash. Read freely; after changing one call
	// PutInventory.
	Inventories map[string]*Inventory
	// Claims in creation order, which is also the order pending claims are
	// served in (the in-cluster provider reconciles one claim at a time).
	// Read freely; change through AddClaim, RemoveClaim and TouchClaim.
	Claims []*Claim

	back    backend
	nextSeq uint64
	dirtyIn map[string]bool   // inventory hashes to write or delete
	dirtyCl map[uint64]*Claim // claims to write (nil: delete)
	hw      map[string][]byte // hardware records to write (nil: delete)
}

// Inventory is one registered machine, a MachineInventory in miniature.
type Inventory struct {
	Name         string            `json:"name"`
	Hash         string            `json:"hash"`
	AuthKind     string            `json:"authKind"`
	Registration string            `json:"registration"`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	// Network is the registration's template as copied at the last
	// registration: ipAddresses maps a placeholder name to a pool name.
	Network *NetworkTemplate `json:"network,omitempty"`
}

// NetworkTemplate is a network config whose ipAddresses name pools.
type NetworkTemplate struct {
	Configurator string                       `json:"configurator,omitempty" yaml:"configurator,omitempty"`
	IPAddresses  map[string]string            `json:"ipAddresses,omitempty" yaml:"ipAddresses,omitempty"`
	Config       map[string]protocol.RawValue `json:"config,omitempty" yaml:"config,omitempty"`
}

// Hardware is what a machine sent about itself.
type Hardware struct {
	SMBIOS     map[string]any `json:"smbios,omitempty"`
	SystemData map[string]any `json:"systemData,omitempty"`
}

// Claim is one (machine, placeholder name) address claim, an
// IPAddressClaim and its IPAddress together.
type Claim struct {
	// Name is <inventory name>-<placeholder name>, as elemental-operator
	// names its IPAddressClaims.
	Name      string    `json:"name"`
	Inventory string    `json:"inventory"` // identity hash
	IPName    string    `json:"ipName"`
	Pool      string    `json:"pool"`
	CreatedAt time.Time `json:"createdAt"`
	// NotBefore is when the claim may get its address (allocation delay).
	NotBefore time.Time `json:"notBefore"`
	Address   string    `json:"address,omitempty"`
	Prefix    int       `json:"prefix,omitempty"`
	Gateway   string    `json:"gateway,omitempty"`
	// Reason and Message describe a claim without address (CAPI's Ready
	// condition reasons plus WaitingForIPAddress).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`

	seq uint64 // database key: creation order
}

// PutInventory records inv (new or changed) for the transaction.
func (st *State) PutInventory(inv *Inventory) {
	st.Inventories[inv.Hash] = inv
	st.dirtyIn[inv.Hash] = true
}

// DeleteInventory removes an inventory, its hardware data and its claims,
// and returns the claims.
func (st *State) DeleteInventory(hash string) []*Claim {
	delete(st.Inventories, hash)
	st.dirtyIn[hash] = true
	st.hw[hash] = nil
	var released []*Claim
	for _, c := range slices.Clone(st.Claims) {
		if c.Inventory == hash {
			st.RemoveClaim(c)
			released = append(released, c)
		}
	}
	return released
}

// AddClaim appends a new claim.
func (st *State) AddClaim(c *Claim) {
	st.nextSeq++
	c.seq = st.nextSeq
	st.Claims = append(st.Claims, c)
	st.dirtyCl[c.seq] = c
}

// RemoveClaim drops a claim; its address is free with the transaction.
func (st *State) RemoveClaim(c *Claim) {
	st.Claims = slices.DeleteFunc(st.Claims, func(x *Claim) bool { return x == c })
	st.dirtyCl[c.seq] = nil
}

// TouchClaim records a change to c.
func (st *State) TouchClaim(c *Claim) { st.dirtyCl[c.seq] = c }

// SetHardware records what a machine sent; a nil map keeps what was stored.
// It returns the size of the stored record, and refuses (changing nothing)
// one larger than limit when limit > 0.
func (st *State) SetHardware(hash string, smbios, systemData map[string]any, limit int) (int, error) {
	if smbios == nil && systemData == nil {
		return 0, nil
	}
	hw := Hardware{SMBIOS: smbios, SystemData: systemData}
	if smbios == nil || systemData == nil {
		old, err := st.Hardware(hash)
		if err != nil {
			return 0, err
		}
		if smbios == nil {
			hw.SMBIOS = old.SMBIOS
		}
		if systemData == nil {
			hw.SystemData = old.SystemData
		}
	}
	b, err := json.Marshal(hw)
	if err != nil {
		return 0, fmt.Errorf("encoding hardware data: %w", err)
	}
	if limit > 0 && len(b) > limit {
		return len(b), fmt.Errorf("hardware data of %d bytes, more than the %d allowed per inventory", len(b), limit)
	}
	st.hw[hash] = b
	return len(b), nil
}

// Hardware is a machine's hardware data: the record about to be written,
// else the stored one, read from the database.
func (st *State) Hardware(hash string) (Hardware, error) {
	var hw Hardware
	b, staged := st.hw[hash]
	if !staged {
		var err error
		if b, err = st.back.get(bucketHardware, []byte(hash)); err != nil {
			return hw, err
		}
	}
	if b == nil {
		return hw, nil
	}
	if err := json.Unmarshal(b, &hw); err != nil {
		return hw, fmt.Errorf("hardware of %s: %w", hash, err)
	}
	return hw, nil
}

func (st *State) dirty() bool {
	return len(st.dirtyIn) > 0 || len(st.dirtyCl) > 0 || len(st.hw) > 0
}

func (st *State) resetDirty() {
	st.dirtyIn = map[string]bool{}
	st.dirtyCl = map[uint64]*Claim{}
	st.hw = map[string][]byte{}
}

// op is one record to write (value nil: delete).
type op struct {
	bucket, key, value []byte
}

// takeOps encodes every recorded change, in a fixed order, and forgets
// the records.
func (st *State) takeOps() ([]op, error) {
	var ops []op
	for h := range st.dirtyIn {
		inv, ok := st.Inventories[h]
		if !ok {
			ops = append(ops, op{bucketInventories, []byte(h), nil})
			continue
		}
		b, err := json.Marshal(inv)
		if err != nil {
			return nil, fmt.Errorf("encoding inventory %s: %w", h, err)
		}
		ops = append(ops, op{bucketInventories, []byte(h), b})
	}
	for seq, c := range st.dirtyCl {
		if c == nil {
			ops = append(ops, op{bucketClaims, seqKey(seq), nil})
			continue
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("encoding claim %s: %w", c.Name, err)
		}
		ops = append(ops, op{bucketClaims, seqKey(seq), b})
	}
	for h, b := range st.hw {
		ops = append(ops, op{bucketHardware, []byte(h), b})
	}
	st.resetDirty()
	return ops, nil
}

// apply writes ops in order in one transaction.
func apply(back backend, ops []op) error {
	return back.update(func(tx txn) error {
		for _, o := range ops {
			var err error
			if o.value == nil {
				err = tx.del(o.bucket, o.key)
			} else {
				err = tx.put(o.bucket, o.key, o.value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// commit writes every recorded change in one transaction (import only;
// Update batches).
func (st *State) commit() error {
	ops, err := st.takeOps()
	if err != nil {
		return err
	}
	return apply(st.back, ops)
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// load reads inventories and claims (not hardware) from the backend.
func load(back backend) (*State, error) {
	st := &State{Inventories: map[string]*Inventory{}, back: back}
	st.resetDirty()
	err := back.forEach(bucketInventories, func(k, v []byte) error {
		var inv Inventory
		if err := json.Unmarshal(v, &inv); err != nil {
			return fmt.Errorf("inventory %q: %w", k, err)
		}
		if inv.Hash != string(k) {
			return fmt.Errorf("inventory under key %q has hash %q", k, inv.Hash)
		}
		st.Inventories[inv.Hash] = &inv
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = back.forEach(bucketClaims, func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("claim key %x is not a sequence number", k)
		}
		c := &Claim{seq: binary.BigEndian.Uint64(k)}
		if err := json.Unmarshal(v, c); err != nil {
			return fmt.Errorf("claim %d: %w", c.seq, err)
		}
		st.Claims = append(st.Claims, c)
		st.nextSeq = max(st.nextSeq, c.seq)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Store is the database-backed state; the zero value is not usable, use
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
}

// Open opens the database at path, creating it when missing. An empty path
// keeps the state in memory only (tests, throw-away demos).
//
// An existing file that is empty or `null` is refused: an empty state is
// only ever a new file, and a blanked file would forget every claim. A file
// in the former JSON format is imported into a new database in one
// transaction; the JSON file is then renamed to path+".imported.json" (and
// its hardware directory to path+".imported.hw").
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	if path == "" {
		s.back = newMemBackend()
	} else {
		imported, err := importIfJSON(path)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
		s.Imported = imported
		if s.back, err = openBolt(path, false); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	st, err := load(s.back)
	if err != nil {
		s.back.close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	s.state = st
	return s, nil
}

// sniff classifies an existing store file by its first bytes.
func sniff(path string) (kind string, data []byte, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing", nil, nil
	}
	if err != nil {
		return "", nil, err
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
		return errors.Join(cause, err)
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
