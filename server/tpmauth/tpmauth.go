// Package tpmauth is the registration server's side of elemental's TPM
// authentication: it verifies a Bearer TPM token the way go-attestation
// v0.5.1 does for elemental-operator (docs/protocol.md, TPM authentication;
// docs/regserver.md, Authentication), challenges the client
// with a credential only its TPM can activate, and names it by its TPM hash.
package tpmauth

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/google/go-tpm/tpm2"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm/wire"
)

// Errors joined with protocol.ErrAuth, for callers that want the reason.
var (
	// ErrInvalidAK: the AK or its creation attestation fails a check.
	ErrInvalidAK = errors.New("invalid attestation key")
	// ErrUntrustedEK: a CA pool is configured and the EK does not chain to
	// it (or came without a certificate).
	ErrUntrustedEK = errors.New("EK not trusted")
	// ErrWrongSecret: the client's answer is not the secret we encrypted.
	ErrWrongSecret = errors.New("challenge answered with the wrong secret")
	// ErrKeyType: an EK or AK no TPM 2.0 creates. Refused before any
	// public-key operation: a client picks the key size, and an RSA
	// operation with a huge modulus costs seconds of CPU per request.
	ErrKeyType = errors.New("key type or size no TPM creates")
)

// maxEKBytes bounds the EK (PEM certificate or public key) before it is
// parsed: EK certificates are a few KiB.
const maxEKBytes = 16 << 10

// rsaTPMBits are the RSA sizes of the TCG EK and AK templates; with the
// template exponent 65537 (written 0 in TPMT_PUBLIC).
var rsaTPMBits = map[int]bool{2048: true, 3072: true}

// checkRSA accepts the RSA keys a TPM 2.0 creates. ECC EKs (P-256, P-384)
// are the other kind a TPM can have; the credential challenge here is
// RSA-only, so wire.ParseEK refuses them before this.
func checkRSA(what string, bits, exponent int) error {
	if !rsaTPMBits[bits] {
		return fmt.Errorf("TPM auth: %w: %s is RSA %d bits, want 2048 or 3072", ErrKeyType, what, bits)
	}
	if exponent != 65537 {
		return fmt.Errorf("TPM auth: %w: %s exponent %d, want 65537", ErrKeyType, what, exponent)
	}
	return nil
}

// Options configure the verifier.
type Options struct {
	// CAPool, when set, is the EK certificate authority (upstream's tpm-ca
	// secret): only EKs sent as certificates chaining to it are accepted.
	CAPool *x509.CertPool
	// Rand draws the challenge secret and the encryption seed; nil means
	// crypto/rand.
	Rand io.Reader
	Log  *logrus.Entry
}

// Authenticator implements protocol.ServerAuthenticator for Bearer TPM.
type Authenticator struct {
	opts Options
}

var _ protocol.ServerAuthenticator = (*Authenticator)(nil)

// New returns a TPM verifier.
func New(opts Options) *Authenticator {
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	opts.Log = logx.OrDiscard(opts.Log)
	return &Authenticator{opts: opts}
}

// Accepts reports whether the header is a TPM token (case-sensitive prefix).
func (a *Authenticator) Accepts(header string) bool {
	return strings.HasPrefix(header, protocol.PrefixTPM)
}

// Authenticate verifies the token, runs the credential challenge over conn
// and returns the TPM hash as identity.
func (a *Authenticator) Authenticate(ctx context.Context, header string, conn protocol.RawConn) (protocol.Identity, error) {
	fail := func(err error) (protocol.Identity, error) {
		return protocol.Identity{}, errors.Join(protocol.ErrAuth, err)
	}
	d, err := wire.DecodeToken(header)
	if err != nil {
		return fail(err)
	}
	v, err := Verify(d, a.opts.CAPool)
	if err != nil {
		return fail(err)
	}
	log := a.opts.Log.WithField("tpmHash", v.Hash)
	msg, secret, err := MakeChallenge(a.opts.Rand, v.EK, v.AKName)
	if err != nil {
		return fail(fmt.Errorf("TPM auth: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("TPM auth: %w", err))
	}
	if err := conn.WriteRaw(msg); err != nil {
		return fail(fmt.Errorf("TPM auth: sending challenge: %w", err))
	}
	resp, err := conn.ReadRaw()
	if err != nil {
		return fail(fmt.Errorf("TPM auth: reading challenge response: %w", err))
	}
	got, err := wire.DecodeResponse(resp)
	if err != nil {
		return fail(fmt.Errorf("TPM auth: %w", err))
	}
	if subtle.ConstantTimeCompare(got, secret) != 1 {
		log.Warn("TPM challenge failed: wrong secret")
		return fail(fmt.Errorf("TPM auth: %w", ErrWrongSecret))
	}
	log.Debug("TPM challenge passed")
	return protocol.Identity{Kind: "tpm", Hash: v.Hash}, nil
}

// Verified is what a token proves before the challenge.
type Verified struct {
	Hash   string
	EK     *rsa.PublicKey
	EKCert *x509.Certificate // nil for a PUBLIC KEY EK
	AKName []byte            // nameAlg || H(TPMT_PUBLIC)
}

// Verify checks the EK (and its chain when pool is set) and the AK.
func Verify(d *wire.AttestationData, pool *x509.CertPool) (*Verified, error) {
	if len(d.EK) > maxEKBytes {
		return nil, fmt.Errorf("TPM auth: %w: EK of %d bytes, at most %d", ErrKeyType, len(d.EK), maxEKBytes)
	}
	ek, cert, err := wire.ParseEK(d.EK)
	if err != nil {
		return nil, err
	}
	if err := checkRSA("EK", ek.N.BitLen(), ek.E); err != nil {
		return nil, err
	}
	hash, err := wire.PubHash(ek)
	if err != nil {
		return nil, err
	}
	if pool != nil {
		if cert == nil {
			return nil, fmt.Errorf("TPM auth: %w: an EK CA is configured but the EK came as a bare public key, without certificate", ErrUntrustedEK)
		}
		// EK certificates carry no ServerAuth usage, and the TCG EK profile
		// puts the TPM's identity in a critical directoryName SAN that Go does
		// not interpret. Upstream's plain Verify rejects every such (real)
		// certificate; we accept both and still require the chain.
		if _, err := tcgCompatible(cert).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return nil, fmt.Errorf("TPM auth: %w: EK certificate: %w", ErrUntrustedEK, err)
		}
	}
	name, err := VerifyAK(d.AK)
	if err != nil {
		return nil, err
	}
	return &Verified{Hash: hash, EK: ek, EKCert: cert, AKName: name}, nil
}

// oidSAN is subjectAltName, critical in TCG EK certificates with an empty
// subject.
const oidSAN = "2.5.29.17"

// tcgCompatible returns cert with a critical subjectAltName no longer counted
// as unhandled; any other unhandled critical extension still fails Verify.
func tcgCompatible(cert *x509.Certificate) *x509.Certificate {
	c := *cert
	c.UnhandledCriticalExtensions = nil
	for _, id := range cert.UnhandledCriticalExtensions {
		if id.String() != oidSAN {
			c.UnhandledCriticalExtensions = append(c.UnhandledCriticalExtensions, id)
		}
	}
	return &c
}

// VerifyAK runs go-attestation v0.5.1's checks on the AK parameters (its
// AK verification steps, docs/protocol.md, TPM authentication) and returns
// the AK's Name, to which the credential is bound.
func VerifyAK(p *wire.AttestationParameters) ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("TPM auth: %w: %s", ErrInvalidAK, fmt.Sprintf(format, args...))
	}
	if p == nil {
		return bad("no AK")
	}
	if len(p.CreateSignature) < 8 {
		return bad("signature of %d bytes", len(p.CreateSignature))
	}
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](p.Public)
	if err != nil {
		return bad("decoding Public: %v", err)
	}
	if err := checkAKKey(pub); err != nil {
		return nil, err
	}
	if _, err := tpm2.Unmarshal[tpm2.TPMSCreationData](p.CreateData); err != nil {
		return bad("decoding CreateData: %v", err)
	}
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](p.CreateAttestation)
	if err != nil {
		return bad("decoding CreateAttestation: %v", err)
	}
	// go-tpm declares but does not enforce the magic check.
	if err := att.Magic.Check(); err != nil {
		return bad("attestation magic: %v", err)
	}
	if att.Type != tpm2.TPMSTAttestCreation {
		return bad("attestation type 0x%04x, want creation", uint16(att.Type))
	}
	info, err := att.Attested.Creation()
	if err != nil {
		return bad("creation info: %v", err)
	}
	if pub.Type != tpm2.TPMAlgRSA {
		return bad("AK type 0x%04x, want RSA", uint16(pub.Type))
	}
	parms, err := pub.Parameters.RSADetail()
	if err != nil {
		return bad("RSA parameters: %v", err)
	}
	if parms.KeyBits < 2048 {
		return bad("AK of %d bits, want at least 2048", parms.KeyBits)
	}
	nameHash, err := pub.NameAlg.Hash()
	if err != nil {
		return bad("name algorithm: %v", err)
	}
	h := nameHash.New()
	h.Write(p.CreateData)
	if subtle.ConstantTimeCompare(h.Sum(nil), info.CreationHash.Buffer) != 1 {
		return bad("CreateData does not match the attested creation hash")
	}
	a := pub.ObjectAttributes
	if !a.FixedTPM || !a.Restricted || !a.FixedParent || !a.SensitiveDataOrigin {
		return bad("AK must be fixedTPM, restricted, fixedParent and sensitiveDataOrigin")
	}
	name := nameOf(pub.NameAlg, nameHash, p.Public)
	if subtle.ConstantTimeCompare(name, info.ObjectName.Buffer) != 1 {
		return bad("attested object name is not the AK's")
	}
	if err := verifySignature(pub, parms, p.CreateAttestation, p.CreateSignature); err != nil {
		return bad("%v", err)
	}
	return name, nil
}

// checkAKKey refuses an AK no TPM creates, before any RSA operation: the
// modulus is the client's to choose and need not match keyBits.
func checkAKKey(pub *tpm2.TPMTPublic) error {
	if pub.Type != tpm2.TPMAlgRSA {
		return fmt.Errorf("TPM auth: %w: AK type 0x%04x, want RSA", ErrKeyType, uint16(pub.Type))
	}
	parms, err := pub.Parameters.RSADetail()
	if err != nil {
		return fmt.Errorf("TPM auth: %w: AK RSA parameters: %v", ErrInvalidAK, err)
	}
	mod, err := pub.Unique.RSA()
	if err != nil {
		return fmt.Errorf("TPM auth: %w: AK modulus: %v", ErrInvalidAK, err)
	}
	bits := new(big.Int).SetBytes(mod.Buffer).BitLen()
	if bits != int(parms.KeyBits) {
		return fmt.Errorf("TPM auth: %w: AK modulus of %d bits, keyBits says %d", ErrKeyType, bits, parms.KeyBits)
	}
	e := int(parms.Exponent)
	if e == 0 {
		e = 65537
	}
	return checkRSA("AK", bits, e)
}

// nameOf computes an object's Name from its raw TPMT_PUBLIC bytes, never
// from a re-marshalled copy.
func nameOf(alg tpm2.TPMIAlgHash, h crypto.Hash, public []byte) []byte {
	d := h.New()
	d.Write(public)
	out := binary.BigEndian.AppendUint16(nil, uint16(alg))
	return d.Sum(out)
}

// verifySignature checks CreateSignature as PKCS#1 v1.5 over the attestation
// with the hash of the AK's own scheme, which is what the v0.5.1 server does.
func verifySignature(pub *tpm2.TPMTPublic, parms *tpm2.TPMSRSAParms, attest, sigBytes []byte) error {
	if parms.Scheme.Scheme != tpm2.TPMAlgRSASSA {
		return fmt.Errorf("AK scheme 0x%04x, want RSASSA", uint16(parms.Scheme.Scheme))
	}
	scheme, err := parms.Scheme.Details.RSASSA()
	if err != nil {
		return fmt.Errorf("AK scheme: %w", err)
	}
	hash, err := scheme.HashAlg.Hash()
	if err != nil {
		return fmt.Errorf("AK scheme hash: %w", err)
	}
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](sigBytes)
	if err != nil {
		return fmt.Errorf("decoding CreateSignature: %w", err)
	}
	if sig.SigAlg != tpm2.TPMAlgRSASSA {
		return fmt.Errorf("signature algorithm 0x%04x, want RSASSA", uint16(sig.SigAlg))
	}
	rsaSig, err := sig.Signature.RSASSA()
	if err != nil {
		return fmt.Errorf("decoding RSASSA signature: %w", err)
	}
	mod, err := pub.Unique.RSA()
	if err != nil {
		return fmt.Errorf("AK modulus: %w", err)
	}
	e := int(parms.Exponent)
	if e == 0 {
		e = 65537
	}
	key := &rsa.PublicKey{N: new(big.Int).SetBytes(mod.Buffer), E: e}
	d := hash.New()
	d.Write(attest)
	if err := rsa.VerifyPKCS1v15(key, hash, d.Sum(nil), rsaSig.Sig.Buffer); err != nil {
		return fmt.Errorf("creation attestation signature: %w", err)
	}
	return nil
}

// MakeChallenge draws a 32-byte secret and encrypts it to the EK, bound to
// the AK's Name (the credential activation of docs/protocol.md, TPM
// authentication). It returns the challenge message and the secret.
func MakeChallenge(rnd io.Reader, ek *rsa.PublicKey, akName []byte) (msg, secret []byte, err error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	tmpl := tpm2.RSAEKTemplate
	parms, err := tmpl.Parameters.RSADetail()
	if err != nil {
		return nil, nil, fmt.Errorf("EK template: %w", err)
	}
	p := *parms
	if ek.E != 65537 {
		p.Exponent = uint32(ek.E)
	}
	p.KeyBits = tpm2.TPMIRSAKeyBits(ek.N.BitLen())
	tmpl.Parameters = tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &p)
	tmpl.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: ek.N.Bytes()})
	key, err := tpm2.ImportEncapsulationKey(&tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("importing EK for encryption: %w", err)
	}
	secret = make([]byte, 32)
	if _, err := io.ReadFull(rnd, secret); err != nil {
		return nil, nil, fmt.Errorf("drawing challenge secret: %w", err)
	}
	idObject, encSecret, err := tpm2.CreateCredential(rnd, key, akName, secret)
	if err != nil {
		return nil, nil, fmt.Errorf("creating credential: %w", err)
	}
	msg, err = wire.EncodeChallenge(idObject, encSecret)
	if err != nil {
		return nil, nil, err
	}
	return msg, secret, nil
}
