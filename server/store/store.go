// Package store keeps the reference server's inventories and address claims
// in one JSON file. Every change is written atomically before the caller
// acts on it, so a restart neither loses nor reassigns an address. Each
// machine's hardware data (SMBIOS, system data: most of the bytes) lives in
// a file of its own beside it, written only when it changes, so the main
// file that every registration rewrites stays small.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nodereg/nodereg/internal/atomicfile"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

// FormatVersion is written into the file so a later format can migrate.
const FormatVersion = 1

// State is the whole persisted content.
type State struct {
	Version int `json:"version"`
	// Inventories by identity hash.
	Inventories map[string]*Inventory `json:"inventories"`
	// Claims in creation order, which is also the order pending claims are
	// served in (the in-cluster provider reconciles one claim at a time).
	Claims []*Claim `json:"claims"`

	// hwDirty names the inventories whose hardware file must be written
	// (or removed) with the next change.
	hwDirty map[string]bool
}

// SetHardware records a machine's SMBIOS and system data; nil keeps what
// was there.
func (st *State) SetHardware(inv *Inventory, smbios, systemData map[string]any) {
	if smbios != nil {
		inv.SMBIOS = smbios
	}
	if systemData != nil {
		inv.SystemData = systemData
	}
	if smbios != nil || systemData != nil {
		st.markHW(inv.Hash)
	}
}

// DeleteInventory removes an inventory and, with the next change, its
// hardware file.
func (st *State) DeleteInventory(hash string) {
	delete(st.Inventories, hash)
	st.markHW(hash)
}

func (st *State) markHW(hash string) {
	if st.hwDirty == nil {
		st.hwDirty = map[string]bool{}
	}
	st.hwDirty[hash] = true
}

// hardware is one machine's hardware file.
type hardware struct {
	SMBIOS     map[string]any `json:"smbios,omitempty"`
	SystemData map[string]any `json:"systemData,omitempty"`
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
	// SMBIOS and SystemData are kept in the machine's hardware file.
	SMBIOS     map[string]any `json:"-"`
	SystemData map[string]any `json:"-"`
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
}

// Store is the file-backed state; the zero value is not usable, use Open.
type Store struct {
	path string

	mu       sync.Mutex
	state    *State
	lastGood []byte // the file's content, to roll back a failed change
}

// Open loads path, or starts empty when it does not exist. An empty path
// keeps the state in memory only (tests, throw-away demos).
func Open(path string) (*Store, error) {
	s := &Store{path: path}
	var data []byte
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("store %s: reading: %w", path, err)
		case len(bytes.TrimSpace(b)) == 0 || string(bytes.TrimSpace(b)) == "null":
			// An empty state is a new file, never an existing one: a
			// truncated or blanked file would forget every claim.
			return nil, fmt.Errorf("store %s: the file exists but holds no state (%d bytes); restore it from a backup or remove it to start empty", path, len(b))
		default:
			data = b
		}
	}
	st, err := s.load(data)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	s.state = st
	s.lastGood = data
	return s, nil
}

// load decodes the main file and reads every machine's hardware file.
func (s *Store) load(data []byte) (*State, error) {
	st, err := decode(data)
	if err != nil || s.path == "" {
		return st, err
	}
	for h, inv := range st.Inventories {
		b, err := os.ReadFile(s.hwPath(h))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var hw hardware
		if err := json.Unmarshal(b, &hw); err != nil {
			return nil, fmt.Errorf("hardware of %s: %w", h, err)
		}
		inv.SMBIOS, inv.SystemData = hw.SMBIOS, hw.SystemData
	}
	return st, nil
}

// hwPath is the hardware file of a machine; hashes are hex, so the name is
// safe.
func (s *Store) hwPath(hash string) string {
	return filepath.Join(s.path+".hw", hash+".json")
}

func decode(data []byte) (*State, error) {
	st := &State{Version: FormatVersion}
	if len(data) > 0 {
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("decoding: %w", err)
		}
		if st.Version != FormatVersion {
			return nil, fmt.Errorf("format version %d, this server reads %d", st.Version, FormatVersion)
		}
	}
	if st.Inventories == nil {
		st.Inventories = map[string]*Inventory{}
	}
	for h, inv := range st.Inventories {
		if inv == nil || inv.Hash != h {
			return nil, fmt.Errorf("inventory under key %q has hash mismatch", h)
		}
	}
	return st, nil
}

// Path is the file the store writes.
func (s *Store) Path() string { return s.path }

// View runs fn with the current state under the lock; fn must not keep
// references past its return nor modify the state.
func (s *Store) View(fn func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.state)
}

// Update runs fn under the lock. When fn reports a change, the new state is
// written to the file before Update returns; if fn or the write fails the
// in-memory state is rolled back to the file's content, so nobody ever acts
// on a state that is not on disk.
func (s *Store) Update(fn func(*State) (changed bool, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed, err := fn(s.state)
	if err == nil && changed {
		err = s.persist()
	}
	if err != nil {
		if st, derr := s.load(s.lastGood); derr == nil {
			s.state = st
		} else {
			err = errors.Join(err, fmt.Errorf("store %s: rolling back: %w", s.path, derr))
		}
	}
	return err
}

func (s *Store) persist() error {
	// Compact: the whole state is re-encoded on every change, and read by
	// programs (the admin view shows it indented).
	data, err := json.Marshal(s.state)
	if err != nil {
		return fmt.Errorf("store %s: encoding: %w", s.path, err)
	}
	data = append(data, '\n')
	if s.path != "" {
		// Hardware first: the main file never names a machine whose
		// hardware file is older than what was acknowledged.
		if err := s.persistHardware(); err != nil {
			return fmt.Errorf("store %s: %w", s.path, err)
		}
		if err := atomicfile.Write(s.path, data, 0o600); err != nil {
			return fmt.Errorf("store %s: %w", s.path, err)
		}
	}
	s.state.hwDirty = nil
	s.lastGood = data
	return nil
}

func (s *Store) persistHardware() error {
	if len(s.state.hwDirty) == 0 {
		return nil
	}
	dir := s.path + ".hw"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for h := range s.state.hwDirty {
		inv, ok := s.state.Inventories[h]
		if !ok {
			if err := atomicfile.Remove(s.hwPath(h)); err != nil {
				return err
			}
			continue
		}
		b, err := json.Marshal(hardware{inv.SMBIOS, inv.SystemData})
		if err != nil {
			return fmt.Errorf("encoding hardware of %s: %w", h, err)
		}
		if err := atomicfile.Write(s.hwPath(h), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
