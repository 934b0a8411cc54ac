package wire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
)

// docs/protocol.md §10: the EK of the emulated TPM with seed 1 and its hash.
const seed1EK = `-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAmWIvK8ze2uNw4YjNeJS8
zdjX7YO7cSqRHGMFhYHa7oj9jBFrzxzNVAnBYI1Nc84AzgUUNC4zOCURjZ15Wswv
/AVyl2GaedD9r4JNEuFP7iGfTJM9s9U2A6cvSlQbKhPVe+1eUwxW2QxrbHJ2hg/j
OeYH/6Be+aSuh/++DU3u0mgFlXOzatnCwH11QdTGMJFZ6Nkw/lqEGwVzkfie2XwK
DdbdgotKdUP1K848Rsb3tvaV84hlMO6NmBMWlXiPTovX3O0ccpTwtMLm6g7Nv3/+
dmgWCfHWSFJ+CXBUv6uKvfl/Wwb4VNe9AgCai1oLef83OcA/TuvcA3HTc3PdUqBZ
9wIDAQAB
-----END PUBLIC KEY-----
`

func TestHashRuleVector(t *testing.T) {
	pub, cert, err := ParseEK([]byte(seed1EK))
	if err != nil || cert != nil {
		t.Fatalf("ParseEK: %v, cert %v", err, cert)
	}
	h, err := PubHash(pub)
	if err != nil {
		t.Fatal(err)
	}
	if h != "a2e5b231dac4e90151454e2ebc76a6b118f7d1b826b810d22868b2d09b38b7f7" {
		t.Errorf("hash %s", h)
	}
	again, err := EncodePublicKeyPEM(pub)
	if err != nil || string(again) != seed1EK {
		t.Errorf("PEM re-encoding differs from upstream's:\n%s", again)
	}
}

func TestTokenPrefixAndErrors(t *testing.T) {
	tok, err := EncodeToken(AttestationData{EK: []byte(seed1EK), AK: &AttestationParameters{Public: []byte{1}}})
	if err != nil {
		t.Fatal(err)
	}
	// docs/protocol.md §10: every TPM header starts like this.
	if !strings.HasPrefix(tok, "Bearer TPMeyJFSyI6IkxTMHRMUzFDUlVkSlRp") {
		t.Errorf("token %.40q", tok)
	}
	if _, err := DecodeToken(tok); err != nil {
		t.Errorf("round trip: %v", err)
	}
	for _, bad := range []string{"Bearer PLAINx", "Bearer TPM!!", "Bearer TPMe30=", "Bearer TPM" + "eyJFSyI6bnVsbH0="} {
		if _, err := DecodeToken(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeToken(%q): %v", bad, err)
		}
	}
}

func TestChallengePrefixes(t *testing.T) {
	msg, err := EncodeChallenge(make([]byte, 68), make([]byte, 256))
	if err != nil {
		t.Fatal(err)
	}
	if len(msg) != 476 || !strings.HasPrefix(string(msg), `{"EC":{"Credential":"AEQ`) {
		t.Errorf("challenge %d bytes %.30q", len(msg), msg)
	}
	id, sec, err := DecodeChallenge(msg)
	if err != nil || len(id) != 68 || len(sec) != 256 {
		t.Fatalf("decode: %v %d %d", err, len(id), len(sec))
	}
	// A size prefix that disagrees with the length is rejected.
	bad := strings.Replace(string(msg), `"Credential":"AEQ`, `"Credential":"AEU`, 1)
	if _, _, err := DecodeChallenge([]byte(bad)); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad prefix: %v", err)
	}
	r, _ := EncodeResponse(make([]byte, 32))
	if !strings.HasSuffix(string(r), "=\"}\n") {
		t.Errorf("response %q", r)
	}
	if s, err := DecodeResponse([]byte(`{"Secret":"AAAA"}`)); err != nil || len(s) != 3 {
		t.Errorf("response without newline: %v", err)
	}
}

func selfSigned(t *testing.T) []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ek"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestParseEKCertificateForms(t *testing.T) {
	der := selfSigned(t)
	header := append([]byte{0x10, 0x01, 0x00, byte(len(der) >> 8), byte(len(der))}, der...)
	padded := append(append([]byte{}, der...), make([]byte, 100)...)
	for name, b := range map[string][]byte{"plain": der, "header": header, "padded": padded} {
		c, err := ParseEKCertificate(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if string(c.Raw) != string(der) {
			t.Errorf("%s: wrong certificate", name)
		}
	}
	if _, err := ParseEKCertificate([]byte{1, 2, 3}); err == nil {
		t.Error("garbage accepted")
	}
	pub, cert, err := ParseEK(EncodeCertificatePEM(der))
	if err != nil || cert == nil || pub == nil {
		t.Errorf("certificate EK: %v", err)
	}
}

func TestParseEKRejects(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	for name, p := range map[string][]byte{
		"not PEM":   []byte("hello"),
		"other PEM": pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: []byte{1}}),
		"ECC EK":    pem.EncodeToMemory(&pem.Block{Type: PEMPublicKey, Bytes: ecDER}),
	} {
		if _, _, err := ParseEK(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
