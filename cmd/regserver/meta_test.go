package main

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nodereg/nodereg/server/store"
)

// metaStore makes a store whose last transaction acknowledges an address,
// and returns its bytes, the newest transaction's number and meta page (as
// bbolt reports them), and the page size.
func metaStore(t *testing.T) (pristine []byte, txid uint64, newest, pageSize int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"m-first", "m-last"} {
		err := st.Update(func(s *store.State) (bool, error) {
			s.PutInventory(&store.Inventory{Name: name, Hash: "h-" + name, CreatedAt: time.Now(), UpdatedAt: time.Now()})
			s.AddClaim(&store.Claim{Name: name + "-ip", Inventory: "h-" + name, IPName: "ip", Pool: "p", Address: "10.0.0.9"})
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	txid, pageSize = uint64(tx.ID()), db.Info().PageSize
	_ = tx.Rollback()
	_ = db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, txid, int(txid % 2), pageSize
}

// TestStoreMetaPages flips a byte in each of the store's two meta pages in
// turn (docs/regserver.md, "A damaged store"): the newest damaged gives 78
// naming the file and the transaction lost, also when the damage is in its
// transaction number; the older damaged is served, with a warning; the
// newest damaged with --accept-older-transaction is served, without the
// last transaction.
func TestStoreMetaPages(t *testing.T) {
	pristine, txid, newest, ps := metaStore(t)
	dir := t.TempDir()
	damaged := func(name string, page, off int, edit func([]byte)) string {
		b := append([]byte(nil), pristine...)
		edit(b[page*ps+off:])
		p := filepath.Join(dir, name+".db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flip := func(b []byte) { b[0] ^= 0xff }
	const root, txidField = 16 + 16, 16 + 48 // in the meta page: the root bucket's page id, the txid
	args := func(p string, extra ...string) []string {
		return append([]string{"--config", "example.yaml", "--listen", "127.0.0.1:0", "--no-tpm", "--store", p}, extra...)
	}

	for name, p := range map[string]string{
		"newest, a byte of its root": damaged("newest-root", newest, root, flip),
		"newest, its txid":           damaged("newest-txid", newest, txidField, func(b []byte) { binary.LittleEndian.PutUint64(b, txid-2) }),
	} {
		var stderr strings.Builder
		code := run(context.Background(), args(p), io.Discard, &stderr)
		got := strings.ReplaceAll(stderr.String(), `\"`, `"`)
		if code != exitConfig {
			t.Errorf("%s: exit %d, want 78; stderr:\n%s", name, code, got)
			continue
		}
		for _, w := range []string{p, "newest transaction", "lose the last commit", "--accept-older-transaction"} {
			if !strings.Contains(got, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, w, got)
			}
		}
	}

	older := damaged("older", 1-newest, root, flip)
	s := startRun(t, args(older)...)
	if s.stop() != 0 || !strings.Contains(s.stderr.String(), "the older one) is damaged") {
		t.Errorf("older damaged: not served with a warning:\n%s", s.stderr.String())
	}

	accepted := damaged("accepted", newest, root, flip)
	s = startRun(t, args(accepted, "--accept-older-transaction")...)
	if s.stop() != 0 || !strings.Contains(s.stderr.String(), "accepted (--accept-older-transaction)") {
		t.Errorf("accepted: not served with a warning:\n%s", s.stderr.String())
	}
	code, out, _ := runCmd("store", "export", "--store", accepted)
	if code != 0 || !strings.Contains(out, "m-first") || strings.Contains(out, "m-last") {
		t.Errorf("served from the older transaction: exit %d, want m-first only:\n%s", code, out)
	}
}

// TestStoreCutToOneMetaPage: a store cut to its first page (one meta page,
// nothing after it) gives 78 naming the file and the cut, never a panic
// (docs/reliability.md: checkMetas read the missing page 1 as a damaged one and
// sliced its empty bytes).
func TestStoreCutToOneMetaPage(t *testing.T) {
	pristine, _, _, ps := metaStore(t)
	for _, n := range []int{ps, ps + 16, ps + 64} {
		p := filepath.Join(t.TempDir(), "cut.db")
		if err := os.WriteFile(p, pristine[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		code := run(context.Background(), []string{"--config", "example.yaml", "--listen", "127.0.0.1:0", "--no-tpm", "--store", p}, io.Discard, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), p) || !strings.Contains(stderr.String(), "truncated") {
			t.Errorf("cut to %d bytes: exit %d, want 78 naming %s and the cut; stderr:\n%s", n, code, p, stderr.String())
		}
	}
}
