package store

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

// The indexes follow the records through changes and are rebuilt the same
// from the database: claims by inventory, names, addresses held, pending
// inventories, and the pools' waiting queues in creation order.
func TestIndexFollowsRecordsAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	err := s.Update(func(st *State) (bool, error) {
		for _, n := range []string{"a", "b", "c", "d"} {
			st.PutInventory(&Inventory{Name: "m-" + n, Hash: "h" + n})
			c := &Claim{Name: "m-" + n + "-ip", Inventory: "h" + n, IPName: "ip", Pool: "p"}
			st.AddClaim(c)
			if n == "a" || n == "b" {
				st.Assign(c, netip.MustParseAddr("10.0.0."+map[string]string{"a": "1", "b": "2"}[n]), 24, "")
			} else {
				c.Reason = protocol.ReasonPoolExhausted
				st.TouchClaim(c)
				st.Enqueue(c)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(st *State, when string) {
		t.Helper()
		if st.Held(netip.MustParseAddr("10.0.0.1")) == nil || st.Held(netip.MustParseAddr("10.0.0.3")) != nil || st.HeldCount() != 2 {
			t.Errorf("%s: addresses held wrong", when)
		}
		if st.PendingInventories() != 2 || !st.IsPending("hc") || st.IsPending("ha") {
			t.Errorf("%s: %d pending inventories", when, st.PendingInventories())
		}
		if st.ByName("m-d") == nil || len(st.ClaimsOf("hd")) != 1 {
			t.Errorf("%s: name or claim index wrong", when)
		}
		if h := st.Waiting("p"); h == nil || h.Name != "m-c-ip" || st.QueueLen("p") != 2 {
			t.Errorf("%s: queue head %v, length %d; want m-c-ip of 2", when, h, st.QueueLen("p"))
		}
	}
	s.View(func(st *State) { check(st, "after the changes") })
	s.Close()
	s2 := open(t, path)
	s2.View(func(st *State) { check(st, "reopened") })

	// Deleting an inventory frees its address, moves a full cursor back
	// and drops its claims from the indexes and the queue.
	err = s2.Update(func(st *State) (bool, error) {
		st.SetCursor("p", Cursor{Full: true})
		st.DeleteInventory("hb")
		st.DeleteInventory("hc")
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s2.View(func(st *State) {
		if cur, _ := st.Cursor("p"); cur.Full || cur.Next != netip.MustParseAddr("10.0.0.2") {
			t.Errorf("cursor after release: %+v, want 10.0.0.2", cur)
		}
		if st.Held(netip.MustParseAddr("10.0.0.2")) != nil || st.ByName("m-b") != nil || st.PendingInventories() != 1 {
			t.Error("deleted inventory still indexed")
		}
		if h := st.Waiting("p"); h == nil || h.Name != "m-d-ip" {
			t.Errorf("queue head %v after the head's inventory went, want m-d-ip", h)
		}
	})
}

// guard turns a panic, and a fault on a memory-mapped page past the end of
// its file (what a truncated store gives bbolt), into ErrDamaged.
func TestGuardTurnsPanicsAndFaultsIntoErrors(t *testing.T) {
	err := guard("reading", func() error {
		var claims []*Claim
		_ = claims[len(claims)+1].Name // index out of range: panics
		return nil
	})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("panic: %v", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "short")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 16384, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	var b byte
	err = guard("reading a page", func() error {
		b = mem[8192] // past the file's end: SIGBUS
		return nil
	})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("fault: %v (read %d)", err, b)
	}
}
