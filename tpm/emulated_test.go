//go:build emulatedtpm && cgo

package tpm

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-attestation/attest"
	"github.com/google/go-tpm/tpm2"

	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm/tpmtest"
	"github.com/nodereg/nodereg/tpm/wire"
)

// Golden vectors (docs/protocol.md §10) (seed → TPM hash, SRK Name, EK Name).
var goldenSeeds = []struct {
	seed          int64
	hash, srk, ek string
}{
	{1, "a2e5b231dac4e90151454e2ebc76a6b118f7d1b826b810d22868b2d09b38b7f7",
		"000b65124c06d8acf71c8c0582d6adf08b3d3f67746d3c2316c4c80c56e15a1e4e70",
		"000b51d1598daa279cef2c9f0e36e4b81120f9e8df88156da30af3369ef86b4e1328"},
	{42, "1b43234451bbb8bff7f701aff7dda9de79ae048e97f7675b562e5cde0bffa90b",
		"000be98688d9bea9afc1929b3b96e7a1333c419397a9088e89af7f11da9b3b61f507",
		"000b561ab7a485b31686444532010dc276dca558c91e6b54574da4ba14e2903215a4"},
	{123456789, "59a8aa85b3732a13f4d894fa42ad19495dd1f6b4b4b5bc8a8165365fb9ddd1a2",
		"000b98d6e7f18ca9ee298755983b56183b075600cc62d1a86094a5b9f30ec10b9616",
		"000baaa2edf25ce9430cc9bc68e3f15468271b3e2417e6c0b6c7c858500f20451242"},
}

func openEmu(t testing.TB, seed int64, blob []byte) *TPM {
	t.Helper()
	tp, err := Open(Options{Emulate: true, Seed: seed, AKBlob: blob})
	if err != nil {
		t.Fatalf("Open(emulated, seed %d): %v", seed, err)
	}
	t.Cleanup(func() { tp.Close() })
	return tp
}

func TestEmulatedGoldenVectors(t *testing.T) {
	for _, g := range goldenSeeds {
		tp := openEmu(t, g.seed, nil)
		h, err := tp.Hash()
		if err != nil {
			t.Fatalf("seed %d: Hash: %v", g.seed, err)
		}
		if h != g.hash {
			t.Errorf("seed %d: hash %s, want %s", g.seed, h, g.hash)
		}
		if got := hex.EncodeToString(tp.ek.name.Buffer); got != g.ek {
			t.Errorf("seed %d: EK Name %s, want %s", g.seed, got, g.ek)
		}
		tp.mu.Lock()
		srk, err := tp.srk()
		tp.mu.Unlock()
		if err != nil {
			t.Fatalf("seed %d: SRK: %v", g.seed, err)
		}
		if got := hex.EncodeToString(srk.name.Buffer); got != g.srk {
			t.Errorf("seed %d: SRK Name %s, want %s", g.seed, got, g.srk)
		}
		tp.flush(srk)
		if err := tp.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEmulatedRoundTripWireShape(t *testing.T) {
	tp := openEmu(t, 1, nil)
	a := tp.Authenticator()
	if a.Kind() != KindEmulatedTPM || !a.HasChallenge() {
		t.Fatalf("Kind %q HasChallenge %v", a.Kind(), a.HasChallenge())
	}
	x := tpmtest.RoundTrip(context.Background(), a, tpmauth.New(tpmauth.Options{}))
	if x.ClientErr != nil || x.ServerErr != nil {
		t.Fatalf("client: %v, server: %v", x.ClientErr, x.ServerErr)
	}
	want := goldenSeeds[0].hash
	if x.Identity.Kind != "tpm" || x.Identity.Hash != want {
		t.Errorf("identity %+v, want tpm/%s", x.Identity, want)
	}
	// docs/protocol.md §10: header prefix and length for seed 1.
	if !strings.HasPrefix(x.Token, "Bearer TPMeyJFSyI6IkxTMHRMUzFDUlVkSlRp") {
		t.Errorf("token prefix %q", x.Token[:40])
	}
	if len(x.Token) != 2406 {
		t.Errorf("token length %d, want 2406", len(x.Token))
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(x.Token, "Bearer TPM"))
	keys := regexp.MustCompile(`"([A-Za-z]+)":`).FindAllStringSubmatch(string(raw), -1)
	var order []string
	for _, k := range keys {
		order = append(order, k[1])
	}
	if got := strings.Join(order, ","); got != "EK,AK,Public,UseTCSDActivationFormat,CreateData,CreateAttestation,CreateSignature" {
		t.Errorf("JSON key order %s", got)
	}
	if !strings.Contains(string(raw), `"UseTCSDActivationFormat":false`) {
		t.Error("UseTCSDActivationFormat not false")
	}
	d, err := wire.DecodeToken(x.Token)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(d.EK), "-----BEGIN PUBLIC KEY-----\n") {
		t.Errorf("EK PEM %q", d.EK[:30])
	}
	// The key sizes and structures of docs/protocol.md §4.1.
	for name, c := range map[string]struct {
		b []byte
		n int
	}{
		"Public": {d.AK.Public, 280}, "CreateData": {d.AK.CreateData, 115},
		"CreateAttestation": {d.AK.CreateAttestation, 139}, "CreateSignature": {d.AK.CreateSignature, 262},
	} {
		if len(c.b) != c.n {
			t.Errorf("%s: %d bytes, want %d", name, len(c.b), c.n)
		}
	}
	if h := hex.EncodeToString(d.AK.CreateAttestation[:6]); h != "ff544347801a" {
		t.Errorf("CreateAttestation starts %s", h)
	}
	if h := hex.EncodeToString(d.AK.CreateSignature[:6]); h != "0014000b0100" {
		t.Errorf("CreateSignature starts %s", h)
	}
	cd, err := tpm2.Unmarshal[tpm2.TPMSCreationData](d.AK.CreateData)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(cd.ParentName.Buffer); got != goldenSeeds[0].srk {
		t.Errorf("CreateData parentName %s, want SRK Name %s", got, goldenSeeds[0].srk)
	}
	// Challenge: 476 bytes, prefixed TPM2Bs of 70 and 258 bytes.
	if len(x.Challenge) != 476 || !strings.HasPrefix(string(x.Challenge), `{"EC":{"Credential":"`) {
		t.Errorf("challenge %d bytes: %.30q", len(x.Challenge), x.Challenge)
	}
	var ch wire.Challenge
	if err := json.Unmarshal(x.Challenge, &ch); err != nil {
		t.Fatal(err)
	}
	if len(ch.EC.Credential) != 70 || hex.EncodeToString(ch.EC.Credential[:2]) != "0044" ||
		len(ch.EC.Secret) != 258 || hex.EncodeToString(ch.EC.Secret[:2]) != "0100" {
		t.Errorf("credential %d bytes, secret %d bytes", len(ch.EC.Credential), len(ch.EC.Secret))
	}
	if !regexp.MustCompile(`^\{"Secret":"[A-Za-z0-9+/]{43}="\}\n$`).Match(x.Response) {
		t.Errorf("response %q", x.Response)
	}
	// docs/protocol.md §4.4: a cold emulated run is 14 commands, two primaries, one Create.
	tp.Close()
	c := tp.Counts()
	if c.Commands != 14 || c.CreatePrimary != 2 || c.Create != 1 {
		t.Errorf("cold counts %d commands, %d CreatePrimary, %d Create; want 14/2/1", c.Commands, c.CreatePrimary, c.Create)
	}
}

// The server elemental-operator runs: go-attestation v0.5.1 Generate.
func TestEmulatedAgainstGoAttestation(t *testing.T) {
	for _, g := range goldenSeeds {
		tp := openEmu(t, g.seed, nil)
		a := tp.Authenticator()
		tok, err := a.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		d, err := wire.DecodeToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		ek, _, err := wire.ParseEK(d.EK)
		if err != nil {
			t.Fatal(err)
		}
		params := attest.ActivationParameters{
			TPMVersion: attest.TPMVersion20,
			EK:         ek,
			AK: attest.AttestationParameters{
				Public: d.AK.Public, CreateData: d.AK.CreateData,
				CreateAttestation: d.AK.CreateAttestation, CreateSignature: d.AK.CreateSignature,
			},
		}
		secret, ec, err := params.Generate()
		if err != nil {
			t.Fatalf("seed %d: go-attestation rejected our token: %v", g.seed, err)
		}
		msg, err := json.Marshal(struct{ EC *attest.EncryptedCredential }{ec})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := a.Answer(context.Background(), msg)
		if err != nil {
			t.Fatalf("seed %d: activation of go-attestation's challenge: %v", g.seed, err)
		}
		got, err := wire.DecodeResponse(resp)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(secret) {
			t.Errorf("seed %d: secret differs", g.seed)
		}
		tp.Close()
	}
}

func TestEmulatedAKReuse(t *testing.T) {
	srv := tpmauth.New(tpmauth.Options{})
	first := openEmu(t, 42, nil)
	x := tpmtest.RoundTrip(context.Background(), first.Authenticator(), srv)
	if x.ClientErr != nil || x.ServerErr != nil {
		t.Fatalf("first run: client %v, server %v", x.ClientErr, x.ServerErr)
	}
	blob := first.AKBlob()
	if len(blob) == 0 {
		t.Fatal("no AK blob after Token")
	}
	first.Close()

	second := openEmu(t, 42, blob)
	y := tpmtest.RoundTrip(context.Background(), second.Authenticator(), srv)
	if y.ClientErr != nil || y.ServerErr != nil {
		t.Fatalf("second run: client %v, server %v", y.ClientErr, y.ServerErr)
	}
	second.Close()
	c := second.Counts()
	if c.Create != 0 {
		t.Errorf("second run created %d AKs, want 0 (cached AK)", c.Create)
	}
	// The emulator is manufactured afresh at every open, so EK and SRK are
	// re-derived (deterministically): exactly those two primaries remain.
	if c.CreatePrimary != 2 {
		t.Errorf("second run: %d CreatePrimary, want 2 (EK, SRK)", c.CreatePrimary)
	}
	if y.Identity.Hash != x.Identity.Hash || y.Token != x.Token {
		t.Error("second run: different identity or token with the same AK")
	}
	if string(second.AKBlob()) != string(blob) {
		t.Error("AK blob changed although the AK was reused")
	}

	// Another TPM cannot load this AK: it is detected and replaced.
	other := openEmu(t, 1, blob)
	z := tpmtest.RoundTrip(context.Background(), other.Authenticator(), srv)
	if z.ClientErr != nil || z.ServerErr != nil {
		t.Fatalf("foreign AK: client %v, server %v", z.ClientErr, z.ServerErr)
	}
	if c := other.Counts(); c.Create != 1 {
		t.Errorf("foreign AK: %d Create, want 1", c.Create)
	}
	if string(other.AKBlob()) == string(blob) {
		t.Error("foreign AK blob kept")
	}
}

func TestEmulatedWrongEKChallenge(t *testing.T) {
	one := openEmu(t, 1, nil)
	tok1, err := one.Authenticator().Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := wire.DecodeToken(tok1)
	ek1, _, _ := wire.ParseEK(d1.EK)
	one.Close()

	tp := openEmu(t, 42, nil)
	a := tp.Authenticator()
	tok, err := a.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := wire.DecodeToken(tok)
	name, err := tpmauth.VerifyAK(d.AK)
	if err != nil {
		t.Fatal(err)
	}
	msg, _, err := tpmauth.MakeChallenge(nil, ek1, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Answer(context.Background(), msg); !errors.Is(err, ErrActivation) {
		t.Errorf("challenge for another EK: %v, want ErrActivation", err)
	}
	// A challenge for our EK but altered in transit fails the same way.
	ek, _, _ := wire.ParseEK(d.EK)
	msg, _, err = tpmauth.MakeChallenge(nil, ek, name)
	if err != nil {
		t.Fatal(err)
	}
	var ch wire.Challenge
	json.Unmarshal(msg, &ch)
	ch.EC.Credential[10] ^= 1
	bad, _ := json.Marshal(ch)
	if _, err := a.Answer(context.Background(), bad); !errors.Is(err, ErrActivation) {
		t.Errorf("tampered challenge: %v, want ErrActivation", err)
	}
	// And the TPM is still usable for the genuine one.
	msg, secret, _ := tpmauth.MakeChallenge(nil, ek, name)
	resp, err := a.Answer(context.Background(), msg)
	if err != nil {
		t.Fatalf("genuine challenge after failures: %v", err)
	}
	if got, _ := wire.DecodeResponse(resp); string(got) != string(secret) {
		t.Error("wrong secret")
	}
}

// BenchmarkEmulatedCommands reports TPM commands and key creations per
// registration on the emulated TPM, cold (no cached AK) and warm.
func BenchmarkEmulatedCommands(b *testing.B) {
	srv := tpmauth.New(tpmauth.Options{})
	var blob []byte
	run := func(b *testing.B, cached []byte) Counts {
		tp, err := Open(Options{Emulate: true, Seed: 42, AKBlob: cached})
		if err != nil {
			b.Fatal(err)
		}
		x := tpmtest.RoundTrip(context.Background(), tp.Authenticator(), srv)
		if x.ClientErr != nil || x.ServerErr != nil {
			b.Fatalf("client %v server %v", x.ClientErr, x.ServerErr)
		}
		blob = tp.AKBlob()
		tp.Close()
		return tp.Counts()
	}
	b.Run("cold", func(b *testing.B) {
		var c Counts
		for i := 0; i < b.N; i++ {
			c = run(b, nil)
		}
		reportCounts(b, c)
	})
	b.Run("warm", func(b *testing.B) {
		run(b, nil)
		cached := blob
		b.ResetTimer()
		var c Counts
		for i := 0; i < b.N; i++ {
			c = run(b, cached)
		}
		reportCounts(b, c)
	})
}
