package tpmauth_test

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/google/go-attestation/attest"

	"github.com/nodereg/nodereg/internal/host"
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
		opts = tpm.Options{Files: host.Root("/"), Device: tpmtest.StartSwtpm(t, false).Device()}
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

// Tampered tokens (docs/protocol.md, TPM authentication): each mutation is
// rejected by our checks and by go-attestation v0.5.1, the server
// elemental-operator runs.
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

// fakeRSAPEM is a PUBLIC KEY PEM with a modulus of the given size: no TPM
// makes one, and the server must not spend an RSA operation finding out.
func fakeRSAPEM(t testing.TB, bits, exponent int) []byte {
	t.Helper()
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	n.SetBit(n, 0, 1)
	b, err := wire.EncodePublicKeyPEM(&rsa.PublicKey{N: n, E: exponent})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// akWithModulus is an AK Public claiming keyBits but carrying modBytes of
// modulus.
func akWithModulus(t testing.TB, keyBits, modBytes int) []byte {
	t.Helper()
	mod := make([]byte, modBytes)
	mod[0], mod[modBytes-1] = 0x80, 1
	pub := tpm2.TPMTPublic{
		Type: tpm2.TPMAlgRSA, NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, Restricted: true, SignEncrypt: true},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Scheme:  tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgRSASSA, Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256})},
			KeyBits: tpm2.TPMIRSAKeyBits(keyBits),
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: mod}),
	}
	return tpm2.Marshal(pub)
}

func authenticateToken(t testing.TB, d wire.AttestationData) error {
	t.Helper()
	tok, err := wire.EncodeToken(d)
	if err != nil {
		t.Fatal(err)
	}
	cli, srvEnd := tpmtest.Pipe()
	_, err = tpmauth.New(tpmauth.Options{}).Authenticate(context.Background(), tok, srvEnd)
	srvEnd.Close()
	if err == nil {
		t.Fatal("token accepted")
	}
	if msg, _ := cli.ReadRaw(); msg != nil {
		t.Error("challenge sent")
	}
	return err
}

// The attack: an RSA EK far above any TPM's size. Refused as a key
// no TPM creates, without an RSA operation (the bound is generous; the
// figure is BenchmarkRefuseOversizedEK).
func TestOversizedKeysRefusedCheaply(t *testing.T) {
	ak := &wire.AttestationParameters{Public: akWithModulus(t, 2048, 256), CreateSignature: make([]byte, 64)}
	cases := map[string]wire.AttestationData{
		"EK of 1M bits":     {EK: fakeRSAPEM(t, 1<<20, 65537), AK: ak},
		"EK of 16384 bits":  {EK: fakeRSAPEM(t, 16384, 65537), AK: ak},
		"EK of 4096 bits":   {EK: fakeRSAPEM(t, 4096, 65537), AK: ak},
		"EK of 1024 bits":   {EK: fakeRSAPEM(t, 1024, 65537), AK: ak},
		"EK exponent 3":     {EK: fakeRSAPEM(t, 2048, 3), AK: ak},
		"AK modulus > bits": {EK: fakeRSAPEM(t, 2048, 65537), AK: &wire.AttestationParameters{Public: akWithModulus(t, 2048, 512), CreateSignature: make([]byte, 64)}},
		"AK of 4096 bits":   {EK: fakeRSAPEM(t, 2048, 65537), AK: &wire.AttestationParameters{Public: akWithModulus(t, 4096, 512), CreateSignature: make([]byte, 64)}},
	}
	for name, d := range cases {
		start := time.Now()
		err := authenticateToken(t, d)
		took := time.Since(start)
		if !errors.Is(err, tpmauth.ErrKeyType) || !errors.Is(err, protocol.ErrAuth) {
			t.Errorf("%s: %v, want ErrKeyType", name, err)
		}
		if took > time.Second {
			t.Errorf("%s: refused after %s", name, took)
		}
	}
}

func BenchmarkRefuseOversizedEK(b *testing.B) {
	ak := &wire.AttestationParameters{Public: akWithModulus(b, 2048, 256), CreateSignature: make([]byte, 64)}
	for _, bits := range []int{16384, 1 << 20} {
		d := wire.AttestationData{EK: fakeRSAPEM(b, bits, 65537), AK: ak}
		b.Run(fmt.Sprint(bits), func(b *testing.B) {
			for b.Loop() {
				if _, err := tpmauth.Verify(&d, nil); !errors.Is(err, tpmauth.ErrKeyType) {
					b.Fatal(err)
				}
			}
		})
	}
}
