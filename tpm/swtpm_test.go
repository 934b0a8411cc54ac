package tpm

import (
	"github.com/google/go-tpm/tpm2"

	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm/tpmtest"
	"github.com/nodereg/nodereg/tpm/wire"
)

// The swtpm tests run in parallel: each starts a simulator of its own
// (its own state directory and socket), and much of their time is
// swtpm_setup and the simulator's start.

func openSw(t testing.TB, s *tpmtest.Swtpm, blob []byte) *TPM {
	t.Helper()
	tp, err := Open(Options{Files: host.Root("/"), Device: s.Device(), AKBlob: blob})
	if err != nil {
		t.Fatalf("Open(%s): %v", s.Device(), err)
	}
	t.Cleanup(func() { tp.Close() })
	return tp
}

// register runs one whole authentication and closes the TPM, as one agent
// run does; it returns the exchange, the AK blob and the run's counts.
func register(t testing.TB, s *tpmtest.Swtpm, blob []byte, srv *tpmauth.Authenticator) (tpmtest.Exchange, []byte, Counts) {
	t.Helper()
	tp := openSw(t, s, blob)
	x := tpmtest.RoundTrip(context.Background(), tp.Authenticator(), srv)
	if x.ClientErr != nil || x.ServerErr != nil {
		t.Fatalf("client: %v, server: %v", x.ClientErr, x.ServerErr)
	}
	if tp.Authenticator().Kind() != KindTPM {
		t.Errorf("Kind %q", tp.Authenticator().Kind())
	}
	b := tp.AKBlob()
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	return x, b, tp.Counts()
}

// tpm2ToolsEKHash reads the persisted EK with tpm2-tools, an implementation
// independent of ours (the cross-check of docs/protocol.md §4.4).
func tpm2ToolsEKHash(t *testing.T, s *tpmtest.Swtpm) string {
	t.Helper()
	if _, err := exec.LookPath("tpm2_readpublic"); err != nil {
		t.Log("tpm2-tools not installed, skipping the tpm2_readpublic cross-check")
		return ""
	}
	out := filepath.Join(s.Dir, "ek.pem")
	cmd := exec.Command("tpm2_readpublic", "-T", "swtpm:path="+s.Socket, "-c", "0x81010001", "-f", "pem", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tpm2_readpublic: %v\n%s", err, b)
	}
	p, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(p)
	if blk == nil {
		t.Fatalf("tpm2_readpublic wrote no PEM: %q", p)
	}
	sum := sha256.Sum256(blk.Bytes)
	return hex.EncodeToString(sum[:])
}

func TestSwtpmRoundTripAndAKReuse(t *testing.T) {
	t.Parallel()
	s := tpmtest.StartSwtpm(t, false)
	srv := tpmauth.New(tpmauth.Options{})

	x, blob, cold := register(t, s, nil, srv)
	if !strings.HasPrefix(x.Token, "Bearer TPMeyJFSyI6IkxTMHRMUzFDUlVkSlRp") {
		t.Errorf("token prefix %.40q", x.Token)
	}
	// docs/protocol.md §4.4: a cold swtpm run is at most 17 commands; EK and SRK primaries, one AK.
	if cold.Commands > 17 || cold.CreatePrimary != 2 || cold.Create != 1 {
		t.Errorf("cold run: %d commands, %d CreatePrimary, %d Create; want ≤17/2/1", cold.Commands, cold.CreatePrimary, cold.Create)
	}
	if h := tpm2ToolsEKHash(t, s); h != "" && h != x.Identity.Hash {
		t.Errorf("tpm2-tools EK hash %s, ours %s", h, x.Identity.Hash)
	}

	y, blob2, warm := register(t, s, blob, srv)
	if warm.KeyCreations() != 0 {
		t.Errorf("warm run: %d key creations (%d primaries, %d creates), want 0", warm.KeyCreations(), warm.CreatePrimary, warm.Create)
	}
	if y.Identity != x.Identity {
		t.Errorf("warm identity %+v, cold %+v", y.Identity, x.Identity)
	}
	if string(blob2) != string(blob) {
		t.Error("AK blob changed although reused")
	}
	// The warm run loads the AK under the SRK Name the blob keeps: the
	// EK is read (the hash), the SRK is not.
	if n := warm.ByCommand[tpm2.TPMCCReadPublic]; n != 1 || warm.Commands != 7 {
		t.Errorf("warm run: %d commands, %d ReadPublic; want 7 and 1 (%v)", warm.Commands, n, warm.ByCommand)
	}

	// The cached AK and the persisted keys survive a swtpm restart.
	s.Stop(t)
	s.Start(t)
	z, _, again := register(t, s, blob, srv)
	if again.KeyCreations() != 0 || z.Identity != x.Identity {
		t.Errorf("after restart: %d key creations, identity %+v", again.KeyCreations(), z.Identity)
	}
	t.Logf("commands per registration: cold %d (%d primaries, %d creates), warm %d, after restart %d",
		cold.Commands, cold.CreatePrimary, cold.Create, warm.Commands, again.Commands)
}

func TestSwtpmEKCertificate(t *testing.T) {
	t.Parallel()
	s := tpmtest.StartSwtpm(t, true)
	caPEM, err := os.ReadFile(s.CACert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	srv := tpmauth.New(tpmauth.Options{CAPool: pool})

	x, blob, cold := register(t, s, nil, srv)
	d, err := wire.DecodeToken(x.Token)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(d.EK), "-----BEGIN CERTIFICATE-----\n") {
		t.Fatalf("EK sent as %.30q, want a CERTIFICATE block", d.EK)
	}
	// swtpm_setup persisted the EK but no SRK: the one primary is the SRK
	// (without it Create would fail; with an EK as well there would be two).
	if cold.CreatePrimary != 1 || cold.Create != 1 || cold.Commands > 17 {
		t.Errorf("cold run: %d commands, %d CreatePrimary, %d Create; want ≤17/1/1", cold.Commands, cold.CreatePrimary, cold.Create)
	}
	_, _, warm := register(t, s, blob, srv)
	if warm.KeyCreations() != 0 {
		t.Errorf("warm run: %d key creations", warm.KeyCreations())
	}
	// swtpm_setup's certificate is under 1 KiB: one NV_Read, and no
	// capability query for the NV buffer size (upstream asks every time).
	for name, c := range map[string]Counts{"cold": cold, "warm": warm} {
		if n, r := c.ByCommand[tpm2.TPMCCGetCapability], c.ByCommand[tpm2.TPMCCNVRead]; n != 0 || r != 1 {
			t.Errorf("%s run: %d GetCapability, %d NV_Read; want 0 and 1 (%v)", name, n, r, c.ByCommand)
		}
	}

	// The hash is the bare template key's hash, as if no certificate existed.
	tp := openSw(t, s, nil)
	tp.mu.Lock()
	_, bare, err := tp.createEK()
	tp.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	bareHash, _ := wire.PubHash(bare)
	if bareHash != x.Identity.Hash {
		t.Errorf("certificate hash %s, bare key hash %s", x.Identity.Hash, bareHash)
	}
	tp.Close()
	if h := tpm2ToolsEKHash(t, s); h != "" && h != x.Identity.Hash {
		t.Errorf("tpm2-tools EK hash %s, ours %s", h, x.Identity.Hash)
	}

	// A CA that did not sign the EK certificate is refused.
	other := tpmtest.StartSwtpm(t, true)
	otherPEM, _ := os.ReadFile(other.CACert)
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(otherPEM)
	y := tpmtest.RoundTrip(context.Background(), openSw(t, s, blob).Authenticator(), tpmauth.New(tpmauth.Options{CAPool: otherPool}))
	if !errors.Is(y.ServerErr, tpmauth.ErrUntrustedEK) || y.Challenge != nil {
		t.Errorf("foreign CA: server %v, challenge sent %v", y.ServerErr, y.Challenge != nil)
	}
}

func TestSwtpmBusy(t *testing.T) {
	t.Parallel()
	s := tpmtest.StartSwtpm(t, false)
	holder := openSw(t, s, nil)
	if _, err := holder.Hash(); err != nil {
		t.Fatal(err)
	}
	tp, err := Open(Options{Files: host.Root("/"), Device: s.Device(), CommandTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	if _, err := tp.Hash(); !errors.Is(err, ErrBusy) {
		t.Errorf("second client: %v, want ErrBusy", err)
	}
}

func TestNoDevice(t *testing.T) {
	root := t.TempDir()
	// A regular file where the device should be is not a TPM either.
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	os.WriteFile(filepath.Join(root, "dev", "tpmrm0"), nil, 0o600)
	_, err := Open(Options{Files: host.Root(root)})
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open without TPM: %v, want ErrNoDevice", err)
	}
	for _, want := range []string{root + "/dev/tpmrm0", root + "/dev/tpm0", "emulate-tpm", "tpm-device"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	_, err = Open(Options{Files: host.Root(root), Device: "unix:///nonexistent.sock"})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "nonexistent.sock") {
		t.Errorf("missing swtpm socket: %v", err)
	}
}

// BenchmarkSwtpmCommands reports TPM commands and key creations per
// registration on swtpm: cold (empty TPM state, no cached AK) and warm
// (persisted SRK and EK, cached AK).
func BenchmarkSwtpmCommands(b *testing.B) {
	srv := tpmauth.New(tpmauth.Options{})
	b.Run("cold", func(b *testing.B) {
		var c Counts
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			s := tpmtest.StartSwtpm(b, false)
			b.StartTimer()
			_, _, c = register(b, s, nil, srv)
			b.StopTimer()
			s.Stop(b)
			b.StartTimer()
		}
		reportCounts(b, c)
	})
	b.Run("warm", func(b *testing.B) {
		s := tpmtest.StartSwtpm(b, false)
		_, blob, _ := register(b, s, nil, srv)
		b.ResetTimer()
		var c Counts
		for i := 0; i < b.N; i++ {
			_, _, c = register(b, s, blob, srv)
		}
		reportCounts(b, c)
	})
}

// With NoPersist (a dry run, a scratch root) a whole authentication leaves
// the TPM's persistent handles as they were, with and without an EK
// certificate, and still proves the identity of a real run; the real run
// then persists the SRK (and the EK), which this check would see.
func TestSwtpmNoPersist(t *testing.T) {
	t.Parallel()
	for _, ekCert := range []bool{false, true} {
		t.Run(fmt.Sprintf("ekcert=%v", ekCert), func(t *testing.T) {
			t.Parallel()
			s := tpmtest.StartSwtpm(t, ekCert)
			srv := tpmauth.New(tpmauth.Options{})
			if ekCert {
				caPEM, err := os.ReadFile(s.CACert)
				if err != nil {
					t.Fatal(err)
				}
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(caPEM)
				srv = tpmauth.New(tpmauth.Options{CAPool: pool})
			}
			before := s.PersistentHandles(t)
			tp, err := Open(Options{Files: host.Root("/"), Device: s.Device(), NoPersist: true})
			if err != nil {
				t.Fatal(err)
			}
			dry := tpmtest.RoundTrip(context.Background(), tp.Authenticator(), srv)
			if dry.ClientErr != nil || dry.ServerErr != nil {
				t.Fatalf("client: %v, server: %v", dry.ClientErr, dry.ServerErr)
			}
			if err := tp.Close(); err != nil {
				t.Fatal(err)
			}
			if after := s.PersistentHandles(t); !slices.Equal(after, before) {
				t.Errorf("persistent handles after a NoPersist run: %#x, before %#x", after, before)
			}

			live, _, _ := register(t, s, nil, srv)
			if live.Identity != dry.Identity {
				t.Errorf("identity of the real run %+v, of the NoPersist run %+v", live.Identity, dry.Identity)
			}
			persisted := s.PersistentHandles(t)
			for _, h := range []uint32{uint32(persistSRK), uint32(persistEK)} {
				if !slices.Contains(persisted, h) {
					t.Errorf("real run: %#x not persisted (handles %#x)", h, persisted)
				}
			}
		})
	}
}

// reportCounts reports what a registration cost the TPM, per operation.
func reportCounts(b *testing.B, c Counts) {
	b.ReportMetric(float64(c.Commands), "cmds/op")
	b.ReportMetric(float64(c.CreatePrimary), "primaries/op")
	b.ReportMetric(float64(c.Create), "creates/op")
}

// A cached AK whose SRK is gone (evicted; a TPM cleared) does not load
// under the kept Name; the SRK is then read, re-created from the
// template (the same key: a primary is derived from the hierarchy's
// seed) and the AK loads under it. No AK is created.
func TestSwtpmCachedAKAfterSRKEvicted(t *testing.T) {
	t.Parallel()
	s := tpmtest.StartSwtpm(t, false)
	srv := tpmauth.New(tpmauth.Options{})
	x, blob, _ := register(t, s, nil, srv)

	tp := openSw(t, s, nil)
	rp, err := (tpm2.ReadPublic{ObjectHandle: persistSRK}).Execute(tp.counter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (tpm2.EvictControl{
		Auth:             tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		ObjectHandle:     tpm2.NamedHandle{Handle: persistSRK, Name: rp.Name},
		PersistentHandle: persistSRK,
	}).Execute(tp.counter); err != nil {
		t.Fatalf("evicting the SRK: %v", err)
	}
	tp.Close()

	y, blob2, warm := register(t, s, blob, srv)
	if warm.Create != 0 || warm.CreatePrimary != 1 || warm.ByCommand[tpm2.TPMCCLoad] != 2 {
		t.Errorf("after the SRK was evicted: %d Create, %d CreatePrimary, %d Load; want 0, 1, 2 (%v)",
			warm.Create, warm.CreatePrimary, warm.ByCommand[tpm2.TPMCCLoad], warm.ByCommand)
	}
	if y.Identity != x.Identity || string(blob2) != string(blob) {
		t.Errorf("identity %+v (was %+v), blob changed %v", y.Identity, x.Identity, string(blob2) != string(blob))
	}
}
