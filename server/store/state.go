package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

// State is what the registry works on under the store's lock: inventories
// and claims, without hardware data. Changes must go through its methods,
// which remember what to write with the transaction and keep the indexes
// (claims by inventory, addresses in use, claims waiting per pool) in step
// with the records, so a registration never has to scan every claim.
type State struct {
	// Inventories by identity hash. Read freely; after changing one call
	// PutInventory.
	Inventories map[string]*Inventory
	// Claims in creation order, which is also the order pending claims are
	// served in (the in-cluster provider reconciles one claim at a time).
	// Read freely; change through AddClaim, RemoveClaim, Assign and
	// TouchClaim.
	Claims []*Claim

	back    backend
	nextSeq uint64
	dirtyIn map[string]bool   // inventory hashes to write or delete
	dirtyCl map[uint64]*Claim // claims to write (nil: delete)
	hw      map[string][]byte // hardware records to write (nil: delete)
	idx     index
}

// index is derived from the records and rebuilt with them whenever the
// state is loaded, so it can never disagree with the database.
type index struct {
	byName  map[string]string     // inventory name -> hash
	byInv   map[string][]*Claim   // hash -> its claims, in creation order
	held    map[netip.Addr]*Claim // every address a claim holds, any pool
	pending map[string]int        // hash -> claims without an address
	waiting map[string][]*Claim   // pool -> claims waiting for a free address
	cursors map[string]Cursor     // pool -> where its lowest free address is
}

// Cursor says where a pool's lowest free address can be: every
// allocatable address below Next is held; Full means every one is.
// Releasing an address moves every cursor back to it, so lowest-free
// allocation costs amortised constant time instead of a walk over the
// addresses in use.
type Cursor struct {
	Next netip.Addr
	Full bool
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

	seq     uint64 // database key: creation order
	removed bool   // dropped from the state; a queue may still hold it
	queued  bool   // in its pool's waiting queue
}

func newState(back backend) *State {
	st := &State{Inventories: map[string]*Inventory{}, back: back}
	st.idx = index{byName: map[string]string{}, byInv: map[string][]*Claim{}, held: map[netip.Addr]*Claim{},
		pending: map[string]int{}, waiting: map[string][]*Claim{}, cursors: map[string]Cursor{}}
	st.resetDirty()
	return st
}

// PutInventory records inv (new or changed) for the transaction.
func (st *State) PutInventory(inv *Inventory) {
	st.Inventories[inv.Hash] = inv
	st.idx.byName[inv.Name] = inv.Hash
	st.dirtyIn[inv.Hash] = true
}

// ByName is the inventory of that name, or nil.
func (st *State) ByName(name string) *Inventory {
	if h, ok := st.idx.byName[name]; ok {
		return st.Inventories[h]
	}
	return nil
}

// ClaimsOf is an inventory's claims in creation order; the slice is the
// index's own, so do not keep or change it.
func (st *State) ClaimsOf(hash string) []*Claim { return st.idx.byInv[hash] }

// DeleteInventory removes an inventory, its hardware data and its claims,
// and returns the claims.
func (st *State) DeleteInventory(hash string) []*Claim {
	if inv := st.Inventories[hash]; inv != nil && st.idx.byName[inv.Name] == hash {
		delete(st.idx.byName, inv.Name)
	}
	delete(st.Inventories, hash)
	st.dirtyIn[hash] = true
	st.hw[hash] = nil
	released := slices.Clone(st.idx.byInv[hash])
	for _, c := range released {
		st.RemoveClaim(c)
	}
	return released
}

// AddClaim appends a new claim.
func (st *State) AddClaim(c *Claim) {
	st.nextSeq++
	c.seq = st.nextSeq
	st.Claims = append(st.Claims, c)
	st.dirtyCl[c.seq] = c
	st.idx.add(c)
}

// RemoveClaim drops a claim; its address is free with the transaction.
func (st *State) RemoveClaim(c *Claim) {
	if c.removed {
		return
	}
	if i := slices.Index(st.Claims, c); i >= 0 {
		st.Claims = slices.Delete(st.Claims, i, i+1)
	}
	st.dirtyCl[c.seq] = nil
	st.idx.remove(c)
}

// TouchClaim records a change to c's reason or message.
func (st *State) TouchClaim(c *Claim) { st.dirtyCl[c.seq] = c }

// Assign gives c the address a (a claim holds at most one, for good).
func (st *State) Assign(c *Claim, a netip.Addr, prefix int, gateway string) {
	if c.Address != "" {
		return
	}
	c.Address, c.Prefix, c.Gateway = a.String(), prefix, gateway
	c.Reason, c.Message = "", ""
	st.dirtyCl[c.seq] = c
	st.idx.held[a.Unmap()] = c
	st.idx.decPending(c.Inventory)
}

// Held is the claim holding address a, whatever its pool, or nil.
func (st *State) Held(a netip.Addr) *Claim { return st.idx.held[a.Unmap()] }

// HeldCount is the number of addresses held.
func (st *State) HeldCount() int { return len(st.idx.held) }

// PendingInventories is the number of inventories with at least one claim
// without an address.
func (st *State) PendingInventories() int { return len(st.idx.pending) }

// IsPending reports whether an inventory has a claim without an address.
func (st *State) IsPending(hash string) bool { return st.idx.pending[hash] > 0 }

// Cursor is a pool's allocation cursor; ok is false before the first
// allocation from it since the state was loaded.
func (st *State) Cursor(pool string) (c Cursor, ok bool) {
	c, ok = st.idx.cursors[pool]
	return c, ok
}

// SetCursor records where a pool's walk for a free address stopped.
func (st *State) SetCursor(pool string, c Cursor) { st.idx.cursors[pool] = c }

// Enqueue puts a claim at the end of its pool's waiting queue (once).
func (st *State) Enqueue(c *Claim) {
	if c.queued || c.removed || c.Address != "" {
		return
	}
	c.queued = true
	st.idx.waiting[c.Pool] = append(st.idx.waiting[c.Pool], c)
}

// Waiting is the head of a pool's queue of claims waiting for an address
// (first come, first served), or nil; claims removed or served since they
// queued are dropped on the way.
func (st *State) Waiting(pool string) *Claim {
	q := st.idx.waiting[pool]
	for len(q) > 0 && (q[0].removed || q[0].Address != "" || q[0].Pool != pool) {
		q[0].queued = false
		q = q[1:]
	}
	if len(q) == 0 {
		delete(st.idx.waiting, pool)
		return nil
	}
	st.idx.waiting[pool] = q
	return q[0]
}

// Dequeue drops the head of a pool's queue (it was served).
func (st *State) Dequeue(pool string) {
	if q := st.idx.waiting[pool]; len(q) > 0 {
		q[0].queued = false
		st.idx.waiting[pool] = q[1:]
	}
}

// WaitingPools are the pools with claims in their queue.
func (st *State) WaitingPools() []string {
	out := make([]string, 0, len(st.idx.waiting))
	for p := range st.idx.waiting {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// QueueLen is the number of claims in a pool's queue (removed ones
// included until they reach its head).
func (st *State) QueueLen(pool string) int { return len(st.idx.waiting[pool]) }

func (ix *index) add(c *Claim) {
	ix.byInv[c.Inventory] = append(ix.byInv[c.Inventory], c)
	if c.Address == "" {
		ix.pending[c.Inventory]++
		return
	}
	if a, err := netip.ParseAddr(c.Address); err == nil {
		ix.held[a.Unmap()] = c
	}
}

func (ix *index) remove(c *Claim) {
	c.removed = true
	cl := slices.DeleteFunc(ix.byInv[c.Inventory], func(x *Claim) bool { return x == c })
	if len(cl) == 0 {
		delete(ix.byInv, c.Inventory)
	} else {
		ix.byInv[c.Inventory] = cl
	}
	if c.Address == "" {
		ix.decPending(c.Inventory)
		return
	}
	a, err := netip.ParseAddr(c.Address)
	if err != nil || ix.held[a.Unmap()] != c {
		return
	}
	a = a.Unmap()
	delete(ix.held, a)
	// The freed address may lie in any pool (pools can be reshaped between
	// restarts): every cursor past it moves back.
	for p, cur := range ix.cursors {
		if cur.Full || a.Less(cur.Next) {
			ix.cursors[p] = Cursor{Next: a}
		}
	}
}

func (ix *index) decPending(hash string) {
	if ix.pending[hash] <= 1 {
		delete(ix.pending, hash)
	} else {
		ix.pending[hash]--
	}
}

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
