// Package wire holds the byte-level encodings of elemental's TPM
// authentication (docs/protocol.md §4.1): the Bearer TPM token, the credential
// challenge and its response, the EK PEM and the TPM hash rule. Both the
// client (package tpm) and the server (package tpmauth) use it, so the two
// sides cannot drift apart.
package wire

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/nodereg/nodereg/protocol"
)

// PEM block types the EK may travel as.
const (
	PEMPublicKey   = "PUBLIC KEY"
	PEMCertificate = "CERTIFICATE"
)

// AttestationData is the JSON inside the token. Field names and order are
// those of elemental-operator's struct, so encoding/json reproduces its bytes.
type AttestationData struct {
	EK []byte                 // PEM text, PUBLIC KEY or CERTIFICATE
	AK *AttestationParameters // go-attestation's AttestationParameters
}

// AttestationParameters mirrors go-attestation's struct of the same name. All
// byte fields are TPM structures without their TPM2B size prefix.
type AttestationParameters struct {
	Public                  []byte // TPMT_PUBLIC
	UseTCSDActivationFormat bool   // always false for TPM 2.0; kept for byte equality
	CreateData              []byte // TPMS_CREATION_DATA
	CreateAttestation       []byte // TPMS_ATTEST, exactly as the TPM produced it
	CreateSignature         []byte // TPMT_SIGNATURE
}

// Challenge is the server's only raw message: {"EC":{...}}.
type Challenge struct {
	EC *EncryptedCredential
}

// EncryptedCredential carries both values with their 2-byte size prefix,
// unlike what tpm2.CreateCredential returns.
type EncryptedCredential struct {
	Credential []byte // TPM2B_ID_OBJECT
	Secret     []byte // TPM2B_ENCRYPTED_SECRET
}

// Response is the client's answer: the decrypted 32-byte secret.
type Response struct {
	Secret []byte
}

// ErrMalformed marks any input that does not decode as the wire format says.
var ErrMalformed = errors.New("malformed TPM authentication data")

// EncodeToken returns the whole Authorization header value.
func EncodeToken(d AttestationData) (string, error) {
	if d.AK == nil {
		return "", fmt.Errorf("encoding TPM token: %w: no AK", ErrMalformed)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return "", fmt.Errorf("encoding TPM token: %w", err)
	}
	return protocol.PrefixTPM + base64.StdEncoding.EncodeToString(b), nil
}

// DecodeToken parses a header produced by EncodeToken (or by upstream).
func DecodeToken(header string) (*AttestationData, error) {
	enc, ok := strings.CutPrefix(header, protocol.PrefixTPM)
	if !ok {
		return nil, fmt.Errorf("decoding TPM token: %w: header does not start with %q", ErrMalformed, protocol.PrefixTPM)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("decoding TPM token: %w: base64: %w", ErrMalformed, err)
	}
	var d AttestationData
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decoding TPM token: %w: json: %w", ErrMalformed, err)
	}
	if len(d.EK) == 0 || d.AK == nil {
		return nil, fmt.Errorf("decoding TPM token: %w: EK or AK missing", ErrMalformed)
	}
	return &d, nil
}

// EncodeChallenge builds the challenge message from the values
// tpm2.CreateCredential returns (without size prefixes).
func EncodeChallenge(idObject, encSecret []byte) ([]byte, error) {
	cred, err := prefix16(idObject)
	if err != nil {
		return nil, fmt.Errorf("encoding challenge credential: %w", err)
	}
	sec, err := prefix16(encSecret)
	if err != nil {
		return nil, fmt.Errorf("encoding challenge secret: %w", err)
	}
	return json.Marshal(Challenge{EC: &EncryptedCredential{Credential: cred, Secret: sec}})
}

// DecodeChallenge parses the challenge and returns both values with their
// size prefixes removed, after checking each prefix matches its length.
func DecodeChallenge(msg []byte) (idObject, encSecret []byte, err error) {
	var c Challenge
	if err := json.Unmarshal(msg, &c); err != nil {
		return nil, nil, fmt.Errorf("decoding challenge: %w: json: %w", ErrMalformed, err)
	}
	if c.EC == nil {
		return nil, nil, fmt.Errorf("decoding challenge: %w: no EC object", ErrMalformed)
	}
	if idObject, err = strip16(c.EC.Credential); err != nil {
		return nil, nil, fmt.Errorf("decoding challenge credential: %w", err)
	}
	if encSecret, err = strip16(c.EC.Secret); err != nil {
		return nil, nil, fmt.Errorf("decoding challenge secret: %w", err)
	}
	return idObject, encSecret, nil
}

// EncodeResponse writes the answer like upstream's json.Encoder does,
// trailing newline included.
func EncodeResponse(secret []byte) ([]byte, error) {
	b, err := json.Marshal(Response{Secret: secret})
	if err != nil {
		return nil, fmt.Errorf("encoding challenge response: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeResponse parses the client's answer; the newline is optional.
func DecodeResponse(msg []byte) ([]byte, error) {
	var r Response
	if err := json.Unmarshal(msg, &r); err != nil {
		return nil, fmt.Errorf("decoding challenge response: %w: json: %w", ErrMalformed, err)
	}
	return r.Secret, nil
}

func prefix16(b []byte) ([]byte, error) {
	if len(b) > 0xffff {
		return nil, fmt.Errorf("%w: %d bytes do not fit a TPM2B", ErrMalformed, len(b))
	}
	out := make([]byte, 2, 2+len(b))
	binary.BigEndian.PutUint16(out, uint16(len(b)))
	return append(out, b...), nil
}

func strip16(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes, no TPM2B size", ErrMalformed, len(b))
	}
	if n := int(binary.BigEndian.Uint16(b)); n != len(b)-2 {
		return nil, fmt.Errorf("%w: TPM2B size %d but %d bytes follow", ErrMalformed, n, len(b)-2)
	}
	return b[2:], nil
}

// PubHash is the TPM hash: lower-case hex SHA-256 of the PKIX DER of the EK
// public key.
func PubHash(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("hashing EK public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]), nil
}

// EncodePublicKeyPEM returns the PUBLIC KEY PEM of the EK.
func EncodePublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding EK public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PEMPublicKey, Bytes: der}), nil
}

// EncodeCertificatePEM returns the CERTIFICATE PEM of the EK certificate.
func EncodeCertificatePEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: PEMCertificate, Bytes: der})
}

// ParseEK decodes the token's EK: the RSA public key, and the certificate
// when one was sent (nil for PUBLIC KEY).
func ParseEK(pemText []byte) (*rsa.PublicKey, *x509.Certificate, error) {
	blk, _ := pem.Decode(pemText)
	if blk == nil {
		return nil, nil, fmt.Errorf("parsing EK: %w: no PEM block", ErrMalformed)
	}
	var (
		pub  crypto.PublicKey
		cert *x509.Certificate
		err  error
	)
	switch blk.Type {
	case PEMCertificate:
		if cert, err = x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, nil, fmt.Errorf("parsing EK certificate: %w: %w", ErrMalformed, err)
		}
		pub = cert.PublicKey
	case PEMPublicKey:
		if pub, err = x509.ParsePKIXPublicKey(blk.Bytes); err != nil {
			return nil, nil, fmt.Errorf("parsing EK public key: %w: %w", ErrMalformed, err)
		}
	default:
		return nil, nil, fmt.Errorf("parsing EK: %w: PEM block %q", ErrMalformed, blk.Type)
	}
	rsaPub, ok := pub.(*rsa.PublicKey)
	if !ok {
		return nil, nil, fmt.Errorf("parsing EK: %w: %T key, only RSA EKs are used", ErrMalformed, pub)
	}
	return rsaPub, cert, nil
}

// ParseEKCertificate reads the content of NV index 0x01C00002 the way
// go-attestation does: an optional 10 01 00 header with a 2-byte length, and
// trailing padding tolerated.
func ParseEKCertificate(b []byte) (*x509.Certificate, error) {
	if len(b) >= 5 && b[0] == 0x10 && b[1] == 0x01 && b[2] == 0x00 {
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if len(b) < 5+n {
			return nil, fmt.Errorf("parsing EK certificate: %w: header says %d bytes, %d present", ErrMalformed, n, len(b)-5)
		}
		b = b[5 : 5+n]
	}
	cert, err := x509.ParseCertificate(b)
	if err == nil {
		return cert, nil
	}
	// NV indexes are often larger than the certificate and padded.
	var raw asn1.RawValue
	if _, aerr := asn1.Unmarshal(b, &raw); aerr != nil {
		return nil, fmt.Errorf("parsing EK certificate: %w", err)
	}
	cert, err2 := x509.ParseCertificate(raw.FullBytes)
	if err2 != nil {
		return nil, fmt.Errorf("parsing EK certificate: %w", err)
	}
	return cert, nil
}
