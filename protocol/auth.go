package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Authorization header prefixes, case-sensitive, no space before the
// identifier or token (docs/protocol.md §4).
const (
	PrefixTPM   = "Bearer TPM"
	PrefixPlain = "Bearer PLAIN"
)

// Authenticator is the client side of authentication. The TPM kind plugs in
// here (package tpm); PLAIN is in this package.
type Authenticator interface {
	// Kind is the value of the `auth` annotation: tpm, emulated-tpm, mac,
	// sys-uuid.
	Kind() string
	// Token returns the full Authorization header value. It is called once
	// per connection, before dialing; slow work belongs here.
	Token(ctx context.Context) (string, error)
	// Answer answers the server's challenge, a whole binary message without
	// type byte. Authenticators without a challenge return nil, nil and are
	// never called (HasChallenge false).
	Answer(ctx context.Context, challenge []byte) ([]byte, error)
	// HasChallenge reports whether the server sends a challenge before
	// MsgReady.
	HasChallenge() bool
}

// RawConn carries messages without a type byte: the TPM challenge and its
// response travel that way.
type RawConn interface {
	WriteRaw(payload []byte) error
	ReadRaw() ([]byte, error)
}

// Identity is who a connection proved to be.
type Identity struct {
	// Kind is "tpm" or "plain".
	Kind string `json:"kind"`
	// Hash is the TPM hash (sha256 of the EK SPKI DER) or the PLAIN machine
	// hash (sha256 of the identifier), 64 lower-case hex characters.
	Hash string `json:"hash"`
}

// ServerAuthenticator is the server side of one authentication kind.
type ServerAuthenticator interface {
	// Accepts reports whether the header is for this kind (prefix match).
	Accepts(header string) bool
	// Authenticate verifies the header; challenge-based kinds use conn.
	Authenticate(ctx context.Context, header string, conn RawConn) (Identity, error)
}

// ErrAuth marks authentication failures.
var ErrAuth = errclass.New(errclass.Transient, "authentication refused (auth kind mismatch?)", "authentication failed")

// Plain is the PLAIN client authenticator for auth: mac and auth: sys-uuid;
// ID is the MAC address or SMBIOS UUID, found by the caller.
type Plain struct {
	AuthKind string // "mac" or "sys-uuid"
	ID       string
}

func (p Plain) Kind() string { return p.AuthKind }

func (p Plain) Token(context.Context) (string, error) {
	if p.ID == "" {
		return "", errors.New("plain auth: empty identifier")
	}
	return PrefixPlain + p.ID, nil
}

func (p Plain) Answer(context.Context, []byte) ([]byte, error) { return nil, nil }
func (p Plain) HasChallenge() bool                             { return false }

// PlainServer is the server side of PLAIN: the identity is the sha256 of the
// identifier exactly as sent.
type PlainServer struct{}

func (PlainServer) Accepts(h string) bool { return strings.HasPrefix(h, PrefixPlain) }

func (PlainServer) Authenticate(_ context.Context, h string, _ RawConn) (Identity, error) {
	id := strings.TrimPrefix(h, PrefixPlain)
	if id == "" {
		return Identity{}, errors.Join(ErrAuth, errors.New("PLAIN header without identifier"))
	}
	return Identity{Kind: "plain", Hash: PlainHash(id)}, nil
}

// PlainHash is the machine hash of a PLAIN identifier.
func PlainHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
