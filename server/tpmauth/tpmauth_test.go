package tpmauth_test

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"

	"github.com/google/go-attestation/attest"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm"
	"github.com/nodereg/nodereg/tpm/tpmtest"
	"github.com/nodereg/nodereg/tpm/wire"
)

// openTPM gives a real TPM: the emulated one when compiled in, else swtpm.
func openTPM(t *testing.T) *tpm.TPM {
	t.Helper()
	opts := tpm.Options{Emulate: true, Seed: 42}
	if !tpm.EmulationAvailable {
		opts = tpm.Options{Device: tpmtest.StartSwtpm(t, false).Device()}
	}
	tp, err := tpm.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	return tp
}

func TestRoundTripAndPrefix(t *testing.T) {
	tp := openTPM(t)
	srv := tpmauth.New(tpmauth.Options{})
	if !srv.Accepts("Bearer TPMabc") || srv.Accepts("Bearer tpmabc") || srv.Accepts("Bearer PLAINx") {
		t.Error("Accepts is not a case-sensitive Bearer TPM prefix match")
	}
	x := tpmtest.RoundTrip(context.Background(), tp.Authenticator(), srv)
	if x.ClientErr != nil || x.ServerErr != nil {
		t.Fatalf("client %v, server %v", x.ClientErr, x.ServerErr)
	}
	h, _ := tp.Hash()
	if x.Identity != (protocol.Identity{Kind: "tpm", Hash: h}) {
		t.Errorf("identity %+v, TPM hash %s", x.Identity, h)
	}
}

// TPM.md §9 tamper table: each mutation is rejected by our checks and by
// go-attestation v0.5.1, the server elemental-operator runs.
func TestTamperedTokens(t *testing.T) {
	tok, err := openTPM(t).Authenticator().Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	good, err := wire.DecodeToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	ek, _, _ := wire.ParseEK(good.EK)
	flip := func(b []byte, i int, mask byte) []byte {
		c := append([]byte{}, b...)
		if i < 0 {
			i += len(c)
		}
		c[i] ^= mask
		return c
	}
	cases := map[string]func(p *wire.AttestationParameters){
		"untouched":          func(*wire.AttestationParameters) {},
		"fixedTPM cleared":   func(p *wire.AttestationParameters) { p.Public = flip(p.Public, 7, 0x02) },
		"restricted cleared": func(p *wire.AttestationParameters) { p.Public = flip(p.Public, 5, 0x01) },
		"modulus byte":       func(p *wire.AttestationParameters) { p.Public = flip(p.Public, -10, 0x01) },
		"CreateData byte":    func(p *wire.AttestationParameters) { p.CreateData = flip(p.CreateData, -3, 0x01) },
		"attestation byte":   func(p *wire.AttestationParameters) { p.CreateAttestation = flip(p.CreateAttestation, -5, 0x01) },
		"magic byte":         func(p *wire.AttestationParameters) { p.CreateAttestation = flip(p.CreateAttestation, 0, 0x01) },
		"signature byte":     func(p *wire.AttestationParameters) { p.CreateSignature = flip(p.CreateSignature, -1, 0x01) },
		"short signature":    func(p *wire.AttestationParameters) { p.CreateSignature = p.CreateSignature[:7] },
	}
	for name, mutate := range cases {
		p := *good.AK
		mutate(&p)
		d := &wire.AttestationData{EK: good.EK, AK: &p}
		_, ours := tpmauth.Verify(d, nil)
		ap := attest.ActivationParameters{
			TPMVersion: attest.TPMVersion20, EK: ek,
			AK: attest.AttestationParameters{Public: p.Public, CreateData: p.CreateData,
				CreateAttestation: p.CreateAttestation, CreateSignature: p.CreateSignature},
		}
		_, _, theirs := ap.Generate()
		if name == "untouched" {
			if ours != nil || theirs != nil {
				t.Errorf("untouched token rejected: ours %v, go-attestation %v", ours, theirs)
			}
			continue
		}
		if !errors.Is(ours, tpmauth.ErrInvalidAK) {
			t.Errorf("%s: ours %v, want ErrInvalidAK", name, ours)
		}
		if theirs == nil {
			t.Errorf("%s: go-attestation accepted it", name)
		}
		// Through Authenticate: rejected before any challenge is sent.
		hdr, err := wire.EncodeToken(*d)
		if err != nil {
			t.Fatal(err)
		}
		cli, srvEnd := tpmtest.Pipe()
		_, err = tpmauth.New(tpmauth.Options{}).Authenticate(context.Background(), hdr, srvEnd)
		srvEnd.Close()
		if !errors.Is(err, protocol.ErrAuth) {
			t.Errorf("%s: Authenticate %v, want ErrAuth", name, err)
		}
		if msg, _ := cli.ReadRaw(); msg != nil {
			t.Errorf("%s: challenge sent for a rejected token", name)
		}
	}
}

// lying answers the challenge with a secret of its own.
type lying struct{ protocol.Authenticator }

func (l lying) Answer(context.Context, []byte) ([]byte, error) {
	return wire.EncodeResponse(make([]byte, 32))
}

func TestWrongSecretRejected(t *testing.T) {
	x := tpmtest.RoundTrip(context.Background(), lying{openTPM(t).Authenticator()}, tpmauth.New(tpmauth.Options{}))
	if !errors.Is(x.ServerErr, tpmauth.ErrWrongSecret) || !errors.Is(x.ServerErr, protocol.ErrAuth) {
		t.Errorf("server %v, want ErrWrongSecret", x.ServerErr)
	}
}

func TestCARejectsBarePublicKey(t *testing.T) {
	tok, err := openTPM(t).Authenticator().Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	cli, srvEnd := tpmtest.Pipe()
	_, err = tpmauth.New(tpmauth.Options{CAPool: pool}).Authenticate(context.Background(), tok, srvEnd)
	srvEnd.Close()
	if !errors.Is(err, tpmauth.ErrUntrustedEK) || !errors.Is(err, protocol.ErrAuth) {
		t.Errorf("bare EK with CA: %v, want ErrUntrustedEK", err)
	}
	if msg, _ := cli.ReadRaw(); msg != nil {
		t.Error("challenge sent to an untrusted EK")
	}
}

func TestMalformedHeaders(t *testing.T) {
	srv := tpmauth.New(tpmauth.Options{})
	for _, h := range []string{"Bearer TPM", "Bearer TPM%%%", "Bearer TPMe30="} {
		_, srvEnd := tpmtest.Pipe()
		if _, err := srv.Authenticate(context.Background(), h, srvEnd); !errors.Is(err, protocol.ErrAuth) {
			t.Errorf("%q: %v", h, err)
		}
	}
}
