package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fuzzStore is a real store as regserver leaves it: inventories, claims
// and hardware over several commits, so both meta pages, branch and leaf
// pages and a freelist exist. Built once per process.
var fuzzStore struct {
	once     sync.Once
	bytes    []byte
	pageSize int
	err      error
}

func realStore() ([]byte, int, error) {
	fuzzStore.once.Do(func() {
		dir, err := os.MkdirTemp("", "store-fuzz-")
		if err != nil {
			fuzzStore.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "state.db")
		s, err := Open(path)
		if err != nil {
			fuzzStore.err = err
			return
		}
		for i := range 40 {
			name, hash := fmt.Sprint("m-", i), fmt.Sprint("h-", i)
			err := s.Update(func(st *State) (bool, error) {
				st.PutInventory(&Inventory{Name: name, Hash: hash, CreatedAt: time.Unix(int64(i), 0)})
				st.AddClaim(&Claim{Name: name + "-ip", Inventory: hash, IPName: "ip", Pool: "p", Address: fmt.Sprint("10.0.0.", i)})
				_, err := st.SetHardware(hash, map[string]any{"System Information": map[string]any{"UUID": strings.Repeat("u", 300)}}, nil, 0)
				return true, err
			})
			if err == nil && i%7 == 0 {
				err = s.Update(func(st *State) (bool, error) { st.DeleteInventory(fmt.Sprint("h-", i-1)); return true, nil })
			}
			if err != nil {
				fuzzStore.err = err
				return
			}
		}
		if fuzzStore.err = s.Close(); fuzzStore.err != nil {
			return
		}
		fuzzStore.bytes, fuzzStore.err = os.ReadFile(path)
		// bbolt's page size is in meta page 0, after the page header,
		// magic and version.
		if fuzzStore.err == nil {
			fuzzStore.pageSize = int(binary.LittleEndian.Uint32(fuzzStore.bytes[pageHeader+8:]))
		}
	})
	return fuzzStore.bytes, fuzzStore.pageSize, fuzzStore.err
}

// Damage kinds of FuzzOpenDamaged, op%damageKinds.
const (
	damageTruncate = iota // cut the file to a bytes
	damageFlip            // xor patch into the file at a (one bit of b when patch is empty)
	damageSwap            // swap pages a and b
	damageCopy            // copy page a over page b
	damageWrite           // write patch at a
	damageKinds
)

// damage applies one damage to a copy of the store; a and b are taken
// modulo the file's length or page count.
func damage(pristine []byte, ps int, op uint8, a, b uint32, patch []byte) []byte {
	f := append([]byte(nil), pristine...)
	n := uint32(len(f))
	pages := n / uint32(ps)
	switch op % damageKinds {
	case damageTruncate:
		return f[:a%(n+1)]
	case damageFlip:
		if len(patch) == 0 {
			patch = []byte{1 << (b % 8)}
		}
		for i, x := range patch {
			f[(a+uint32(i))%n] ^= x
		}
	case damageSwap, damageCopy:
		pa, pb := int(a%pages)*ps, int(b%pages)*ps
		saved := append([]byte(nil), f[pb:pb+ps]...)
		copy(f[pb:pb+ps], f[pa:pa+ps])
		if op%damageKinds == damageSwap {
			copy(f[pa:pa+ps], saved)
		}
	case damageWrite:
		copy(f[a%n:], patch)
	}
	return f
}

// FuzzOpenDamaged damages a real store (truncations, bit flips, page swaps
// and copies, overwrites) and opens it as regserver does, then exports it
// as `regserver store export` does. Every input gives an error naming the
// file (regserver's 78), or a store that is served: read, written, closed.
// None may panic (docs/reliability.md: a store cut after its first page did, in the
// meta-page check).
func FuzzOpenDamaged(f *testing.F) {
	pristine, ps, err := realStore()
	if err != nil {
		f.Fatal(err)
	}
	pages := uint32(len(pristine) / ps)
	// Seeds: each cut at and around every page boundary of the meta pages
	// and the first data pages, a bit flipped in each meta field of both
	// meta pages, the meta pages swapped with each other and with data
	// pages, one copied over the other, a page header zeroed.
	for _, cut := range []uint32{0, 16, 64, metaLen, uint32(ps), uint32(ps) + 16, uint32(ps) + metaLen, 2 * uint32(ps), 3*uint32(ps) + 1, uint32(len(pristine)) - 1} {
		f.Add(uint8(damageTruncate), cut, uint32(0), []byte(nil))
	}
	for page := range uint32(2) {
		for _, field := range []uint32{0, 8, pageHeader, pageHeader + 4, pageHeader + 8, pageHeader + 16, pageHeader + 32, pageHeader + 40, metaTxid, metaChecksum} {
			f.Add(uint8(damageFlip), page*uint32(ps)+field, uint32(3), []byte(nil))
		}
	}
	for _, pair := range [][2]uint32{{0, 1}, {0, 2}, {1, 3}, {2, pages - 1}, {3, 4}} {
		f.Add(uint8(damageSwap), pair[0], pair[1], []byte(nil))
		f.Add(uint8(damageCopy), pair[0], pair[1], []byte(nil))
	}
	if id := branchPage(pristine, ps); id > 0 {
		// A branch page whose first child is itself: bbolt's cursor
		// descends forever (the stack overflows: the process ends).
		f.Add(uint8(damageWrite), uint32(id*ps+pageHeader+8), uint32(0), binary.LittleEndian.AppendUint64(nil, uint64(id)))
	}
	f.Add(uint8(damageWrite), uint32(2*ps), uint32(0), make([]byte, 16))
	f.Add(uint8(damageWrite), uint32(0), uint32(0), []byte("{"))
	f.Add(uint8(damageFlip|0x80), uint32(ps)+pageHeader+16, uint32(1), []byte(nil))

	f.Fuzz(func(t *testing.T, op uint8, a, b uint32, patch []byte) {
		if len(patch) > 4*ps {
			return
		}
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, damage(pristine, ps, op, a, b, patch), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ExportFile(path, io.Discard); err != nil && !strings.Contains(err.Error(), path) {
			t.Errorf("export: error does not name the file: %v", err)
		}
		s, err := OpenWith(path, Options{AcceptOlderTransaction: op&0x80 != 0})
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("open: error does not name the file: %v", err)
			}
			return
		}
		// Served: what regserver does with a store must hold too.
		s.View(func(st *State) { _ = st.ByName("m-1") })
		if _, err := s.Hardware("h-3"); err != nil && !errors.Is(err, ErrDamaged) {
			t.Errorf("served store: hardware: %v", err)
		}
		_ = s.Update(func(st *State) (bool, error) {
			st.PutInventory(&Inventory{Name: "m-new", Hash: "h-new"})
			return true, nil
		})
		var out bytes.Buffer
		_ = s.Export(&out)
		if err := s.Close(); err != nil && !errors.Is(err, ErrDamaged) {
			t.Errorf("served store: close: %v", err)
		}
	})
}

// branchPage is the id of the store's first branch page, or 0.
func branchPage(b []byte, ps int) int {
	inUse := pagesInUse(b)
	for id := 2; id < len(b)/ps; id++ {
		if p := b[id*ps:]; binary.LittleEndian.Uint64(p) == uint64(id) && binary.LittleEndian.Uint16(p[pageFlagsOff:]) == branchPageFlag && inUse[id] {
			return id
		}
	}
	return 0
}

// pagesInUse asks bbolt which pages of b are not on its freelist: a freed
// branch page keeps its header, and damage there changes nothing bbolt
// reads (how the layout falls varies from run to run).
func pagesInUse(b []byte) map[int]bool {
	dir, err := os.MkdirTemp("", "store-pages-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	if os.WriteFile(path, b, 0o600) != nil {
		return nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil
	}
	defer db.Close()
	inUse := map[int]bool{}
	_ = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			inUse[id] = info.Type != "free"
		}
	})
	return inUse
}

// TestAPageThatIsItsOwnChild: a branch page pointing back at itself
// (bbolt's cursor would descend forever and overflow the stack, which no
// recover catches) is refused at open, naming the file; the export leaves
// out the bucket it is in, saying so, and salvages the others.
func TestAPageThatIsItsOwnChild(t *testing.T) {
	pristine, ps, err := realStore()
	if err != nil {
		t.Fatal(err)
	}
	id := branchPage(pristine, ps)
	if id == 0 {
		t.Fatal("the real store has no branch page: grow it")
	}
	b := append([]byte(nil), pristine...)
	binary.LittleEndian.PutUint64(b[id*ps+pageHeader+8:], uint64(id))
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenWith(path, Options{})
	if err == nil {
		s.Close()
	}
	if err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "reached twice") {
		t.Errorf("open: %v, want the damage named", err)
	}
	var out bytes.Buffer
	problems, err := ExportFile(path, &out)
	if err != nil || len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), "reached twice") {
		t.Errorf("export: %v, problems %q: want the damaged bucket left out and named", err, problems)
	}
	if !strings.Contains(out.String(), `"inventories"`) {
		t.Errorf("export salvaged nothing:\n%s", out.String())
	}
}
