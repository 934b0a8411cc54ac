package tpm

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/nodereg/nodereg/internal/host"
)

// Template bytes of the keys of docs/protocol.md §4.4.
func TestTemplatesMatchTPMmd(t *testing.T) {
	zeros := strings.Repeat("00", 256)
	for name, c := range map[string]struct {
		tmpl tpm2.TPMTPublic
		want string
	}{
		"AK":  {akTemplate(), "0001000b00050472000000100014000b0800000000000000"},
		"EK":  {ekTemplate(nil), "0001000b000300b20020837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa000600800043001008000000000001" + "00" + zeros},
		"SRK": {srkTemplate(), "0001000b0003047200000006008000430010080000000000" + "0100" + zeros},
	} {
		got := hex.EncodeToString(tpm2.Marshal(c.tmpl))
		if got != c.want {
			t.Errorf("%s template\n got %s\nwant %s", name, got, c.want)
		}
	}
	if n := len(tpm2.Marshal(ekTemplate(nil))); n != 314 {
		t.Errorf("EK template %d bytes, want 314", n)
	}
	nonce := []byte{1, 2, 3}
	got := tpm2.Marshal(ekTemplate(nonce))
	if hex.EncodeToString(got[58:61]) != "010203" || len(got) != 314 {
		t.Errorf("nonce not at the front of unique: %x", got[56:64])
	}
}

// docs/protocol.md §4.2 table and §11 vectors.
func TestResolveSeed(t *testing.T) {
	const uuid = "8e2f4b1a-0c3d-4e5f-9a6b-7c8d9e0f1a2b"
	const fromUUID = -7319619821676586453
	for _, c := range []struct {
		emulate       bool
		cfg           int64
		stateEmulated bool
		state         int64
		want          int64
	}{
		{true, -1, false, 7, fromUUID},
		{true, 5, true, 7, 7},
		{true, 5, false, 7, 5},
		{true, -1, true, 7, 7},
		{false, 5, false, 7, 7},
		{false, -1, false, 7, 7},
	} {
		if got := ResolveSeed(c.emulate, c.cfg, c.stateEmulated, c.state, uuid); got != c.want {
			t.Errorf("ResolveSeed(%v,%d,%v,%d) = %d, want %d", c.emulate, c.cfg, c.stateEmulated, c.state, got, c.want)
		}
	}
	if got := SeedFromUUID("00000000-0000-0000-0000-000000000001"); got != 1 {
		t.Errorf("SeedFromUUID(...0001) = %d, want 1", got)
	}
	for _, bad := range []string{"unknown", "", "00000000-0000-0000-0000-000000000000"} {
		if s := SeedFromUUID(bad); s == 0 || s == RandomSeed {
			t.Errorf("SeedFromUUID(%q) = %d", bad, s)
		}
	}
}

func TestSeedZeroRefused(t *testing.T) {
	if _, err := Open(Options{Emulate: true, Seed: 0}); !errors.Is(err, ErrBadSeed) {
		t.Errorf("seed 0: %v, want ErrBadSeed", err)
	}
}

type echoTPM struct{}

func (echoTPM) Send(b []byte) ([]byte, error) { return b, nil }

func TestCounter(t *testing.T) {
	c := &Counter{Next: echoTPM{}}
	cmd := func(cc tpm2.TPMCC) []byte {
		b := make([]byte, 10)
		binary.BigEndian.PutUint32(b[6:], uint32(cc))
		return b
	}
	for _, cc := range []tpm2.TPMCC{tpm2.TPMCCCreatePrimary, tpm2.TPMCCCreate, tpm2.TPMCCLoad, tpm2.TPMCCLoad} {
		if _, err := c.Send(cmd(cc)); err != nil {
			t.Fatal(err)
		}
	}
	got := c.Counts()
	if got.Commands != 4 || got.CreatePrimary != 1 || got.Create != 1 || got.KeyCreations() != 2 || got.ByCommand[tpm2.TPMCCLoad] != 2 {
		t.Errorf("counts %+v", got)
	}
}

func TestBadAKBlobIgnored(t *testing.T) {
	for _, b := range []string{"not json", `{"v":2}`, `{"v":1,"public":"AA=="}`} {
		if _, err := decodeAKBlob([]byte(b)); err == nil {
			t.Errorf("blob %q accepted", b)
		}
	}
}

// Under --root R, a swtpm socket path whose directory is a link out of R
// (R/run -> outside, or the socket itself a link there) is never dialed:
// the listener outside sees no connection.
func TestSocketUnderRootStaysInRoot(t *testing.T) {
	outside := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(outside, "swtpm.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, plant := range map[string]func(root string) error{
		"directory link": func(root string) error { return os.Symlink(outside, filepath.Join(root, "run")) },
		"socket link": func(root string) error {
			if err := os.Mkdir(filepath.Join(root, "run"), 0o755); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(outside, "swtpm.sock"), filepath.Join(root, "run/swtpm.sock"))
		},
	} {
		root := t.TempDir()
		if err := plant(root); err != nil {
			t.Fatal(err)
		}
		_, err := Open(Options{Files: host.Root(root), Device: SocketScheme + "/run/swtpm.sock", CommandTimeout: time.Second})
		if !errors.Is(err, ErrNoDevice) {
			t.Errorf("%s: %v, want no device", name, err)
		}
	}
	// A dial that reached the socket is queued there already (a unix
	// socket's connect completes in the backlog, and Open has returned):
	// Accept returns it at once; the deadline only ends the wait for none.
	if err := ln.(*net.UnixListener).SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the socket outside the root was dialed")
	}
}
