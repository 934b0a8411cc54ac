// Package catrust keeps the registration server's CA through a rotation
// (docs/ca-rotation.md): a new CA the server announces in its reply's
// ca-cert, over a conversation the CA in force verified alone, is kept as
// pending, both are trusted, and the old one is dropped once a handshake
// verified by the new one alone succeeds. It is the one
// deliberate exception to the keep-local rule for ca-cert
// (agent/localconfig KeepLocal), handled apart from config merging.
package catrust

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// Dir holds the rotated CAs (host path); both files are 0600.
const Dir = host.CADir

// The CA files: current is the rotated CA in use (over the config's
// ca-cert once present); pending the announced one not yet proven.
var (
	CurrentPath = path.Join(Dir, "current.pem")
	PendingPath = path.Join(Dir, "pending.pem")
)

// MaxPEM bounds an announced CA: a few certificates, never more.
const (
	MaxPEM   = 64 << 10
	maxCerts = 8
)

// ProbeTimeout bounds the handshake that proves the pending CA.
const ProbeTimeout = 5 * time.Second

// Trust is the CA store on a host FS.
type Trust struct{ Files host.FS }

func (t Trust) read(p string) ([]byte, error) {
	b, err := t.Files.ReadFile(p, MaxPEM)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// trusted is the CA in force: the rotated current, else the config's
// (PEM text, as localconfig.CA reads it; "" when the config pins none).
func (t Trust) trusted(configCA string) ([]byte, error) {
	cur, err := t.read(CurrentPath)
	if err != nil || cur != nil {
		return cur, err
	}
	if configCA == "" {
		return nil, nil
	}
	return protocol.CAPEM(nil, configCA)
}

// Bundle is what a dial trusts, as a ca-cert value: configCA unchanged
// when no rotation is under way, else the PEM of the CA in force followed
// by the pending one.
func (t Trust) Bundle(configCA string) (string, error) {
	cur, err := t.read(CurrentPath)
	if err != nil {
		return configCA, err
	}
	pend, err := t.read(PendingPath)
	if err != nil {
		return configCA, err
	}
	if cur == nil && pend == nil {
		return configCA, nil // a normal boot: two failed opens, no parsing
	}
	in, err := t.trusted(configCA)
	if err != nil {
		return configCA, err
	}
	return string(append(append(bytes.TrimRight(in, "\n"), '\n'), pend...)), nil
}

// ErrNotPinned: the config pins no CA (the system pool verifies), so
// there is nothing to rotate and an announced CA is not taken.
var ErrNotPinned = errors.New("announced CA not taken: no CA is pinned (ca-cert), so the system pool verified the conversation")

// Outcome is what Offer or Promote did.
type Outcome string

// Outcomes of Offer and Promote.
const (
	Unchanged Outcome = "unchanged" // nothing announced, or a CA already kept
	Pending   Outcome = "pending"   // kept as pending: both trusted now
	Replaced  Outcome = "replaced"  // kept as pending in place of another
	Promoted  Outcome = "promoted"  // the pending CA is now the one in force
	Dropped   Outcome = "dropped"   // the pending CA was removed (the error says why)
)

// Offer decides on the ca-cert the server sent over a conversation with
// url that Bundle(configCA) verified, peer being the chain the server
// presented. A new CA is kept as pending only when that chain verifies
// against the CA in force alone (a CA pinned, https, no system pool, not
// the pending CA), and when the new CA could verify the server now. The
// server so verified decides the rotation: announcing another CA replaces
// the pending one, announcing none (or the CA in force) drops it.
// Anything refused is returned with the reason.
func (t Trust) Offer(rawURL, sent, configCA string, peer []*x509.Certificate) (Outcome, error) {
	in, err := t.trusted(configCA)
	if err != nil {
		return Unchanged, err
	}
	pend, err := t.read(PendingPath)
	if err != nil {
		return Unchanged, err
	}
	var certs []*x509.Certificate
	if sent != "" {
		if certs, err = parseCAs([]byte(sent)); err != nil {
			return Unchanged, fmt.Errorf("announced CA refused: %w", err)
		}
		if pend != nil && sameCerts(certs, pend) {
			return Unchanged, nil
		}
	}
	announcesNone := sent == "" || sameCerts(certs, in)
	if announcesNone && pend == nil {
		return Unchanged, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return Unchanged, errors.New("announced CA refused: it came over plain http, which nothing verified")
	}
	if in == nil {
		return Unchanged, ErrNotPinned
	}
	now := time.Now()
	if err := verifiedBy(in, peer, u.Hostname(), now); err != nil {
		return Unchanged, fmt.Errorf("announced CA refused: the server's certificate does not verify against the CA in force alone: %w", err)
	}
	if announcesNone {
		return t.drop("the server, verified by the CA in force, no longer announces it")
	}
	for _, c := range certs {
		if err := canVerify(c, u.Hostname(), now); err != nil {
			return Unchanged, fmt.Errorf("announced CA refused: it cannot verify the server now: %w", err)
		}
	}
	if err := t.Files.MkdirAll(Dir, 0o700); err != nil {
		return Unchanged, err
	}
	if err := t.Files.WriteFile(PendingPath, []byte(sent), 0o600); err != nil {
		return Unchanged, err
	}
	if pend != nil {
		return Replaced, nil
	}
	return Pending, nil
}

// drop removes the pending CA, so that the next announcement starts over.
func (t Trust) drop(why string) (Outcome, error) {
	if err := t.Files.Remove(PendingPath); err != nil {
		return Unchanged, err
	}
	return Dropped, fmt.Errorf("pending CA dropped: %s", why)
}

// Promote proves a pending CA kept by an earlier run: a TLS handshake
// with url verified by it alone. On success it becomes the CA in force and
// the old one is dropped; a pending CA that can no longer verify the
// server (expired, constrained away from its host) is dropped; otherwise
// both stay. Without a pending CA it does nothing.
func (t Trust) Promote(ctx context.Context, rawURL string) (Outcome, error) {
	pend, err := t.read(PendingPath)
	if err != nil || pend == nil {
		return Unchanged, err
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return Unchanged, fmt.Errorf("not an https URL")
	}
	certs, err := parseCAs(pend)
	if err == nil {
		for _, c := range certs {
			if err = canVerify(c, u.Hostname(), time.Now()); err != nil {
				break
			}
		}
	}
	if err != nil {
		return t.drop(fmt.Sprintf("it can never verify the server: %v", err))
	}
	if err := handshake(ctx, u, string(pend)); err != nil {
		return Unchanged, err
	}
	// current first: a stop between the two leaves current == pending,
	// which Bundle and the next Promote take as they are.
	if err := t.Files.WriteFile(CurrentPath, pend, 0o600); err != nil {
		return Unchanged, err
	}
	return Promoted, t.Files.Remove(PendingPath)
}

func handshake(ctx context.Context, u *url.URL, caPEM string) error {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	tc, err := protocol.TLSConfig(caPEM, true)
	if err != nil {
		return err
	}
	tc.ServerName = u.Hostname()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	d := tls.Dialer{Config: tc, NetDialer: &net.Dialer{}}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return fmt.Errorf("handshake verified by the pending CA alone: %w", err)
	}
	return c.Close()
}
