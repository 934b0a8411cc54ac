// Package catrust keeps the registration server's CA through a rotation
// (docs/ca-rotation.md): a new CA the server announces in its reply's
// ca-cert is kept as pending, both are trusted, and the old one is dropped
// once a handshake verified by the new one alone succeeds. It is the one
// deliberate exception to the keep-local rule for ca-cert
// (agent/localconfig KeepLocal), handled apart from config merging.
package catrust

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
const Dir = "/oem/nodereg/ca"

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
// (PEM text or a path on this machine, as localconfig.CA gives it; ""
// when the config pins none).
func (t Trust) trusted(configCA string) ([]byte, error) {
	cur, err := t.read(CurrentPath)
	if err != nil || cur != nil {
		return cur, err
	}
	if configCA == "" {
		return nil, nil
	}
	return protocol.CAPEM(configCA)
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

// Outcome is what Offer did with an announced CA.
type Outcome string

// Outcomes of Offer.
const (
	Unchanged Outcome = "unchanged" // nothing announced, or a CA already kept
	Pending   Outcome = "pending"   // kept as pending: both trusted now
)

// Offer decides on the ca-cert the server sent over a conversation with
// url that Bundle(configCA) verified. A new CA is kept as pending only
// when that conversation can only have been verified by the CA in force:
// https, a CA pinned, and no pending CA (with one, the new CA alone may
// have verified it). Anything else is refused with the reason.
func (t Trust) Offer(rawURL, sent, configCA string) (Outcome, error) {
	if sent == "" {
		return Unchanged, nil
	}
	in, err := t.trusted(configCA)
	if err != nil {
		return Unchanged, err
	}
	pend, err := t.read(PendingPath)
	if err != nil {
		return Unchanged, err
	}
	ders, err := parseCAs([]byte(sent))
	if err != nil {
		return Unchanged, fmt.Errorf("announced CA refused: %w", err)
	}
	if sameCerts(ders, in) || (pend != nil && sameCerts(ders, pend)) {
		return Unchanged, nil
	}
	if u, err := url.Parse(rawURL); err != nil || u.Scheme != "https" {
		return Unchanged, errors.New("announced CA refused: it came over plain http, which nothing verified")
	}
	if in == nil {
		return Unchanged, ErrNotPinned
	}
	if pend != nil {
		return Unchanged, errors.New("announced CA refused: a rotation is under way, so the conversation may have been verified by the pending CA alone")
	}
	if err := t.Files.MkdirAll(Dir, 0o700); err != nil {
		return Unchanged, err
	}
	if err := t.Files.WriteFile(PendingPath, []byte(sent), 0o600); err != nil {
		return Unchanged, err
	}
	return Pending, nil
}

// Promote proves a pending CA: a TLS handshake with url verified by it
// alone (no system pool). On success it becomes the CA in force and the
// old one is dropped; on failure both stay. Without a pending CA it does
// nothing.
func (t Trust) Promote(ctx context.Context, rawURL string) (bool, error) {
	pend, err := t.read(PendingPath)
	if err != nil || pend == nil {
		return false, err
	}
	if err := handshake(ctx, rawURL, string(pend)); err != nil {
		return false, err
	}
	// current first: a stop between the two leaves current == pending,
	// which Bundle and the next Promote take as they are.
	if err := t.Files.WriteFile(CurrentPath, pend, 0o600); err != nil {
		return false, err
	}
	return true, t.Files.Remove(PendingPath)
}

func handshake(ctx context.Context, rawURL, caPEM string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" {
		return fmt.Errorf("not an https URL")
	}
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

// parseCAs checks announced PEM: bounded, certificates only, each a CA.
func parseCAs(b []byte) ([][]byte, error) {
	if len(b) > MaxPEM {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxPEM)
	}
	var ders [][]byte
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block, want certificates only", blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%q is not a CA certificate", c.Subject.CommonName)
		}
		if ders = append(ders, blk.Bytes); len(ders) > maxCerts {
			return nil, fmt.Errorf("more than %d certificates", maxCerts)
		}
	}
	if len(ders) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return ders, nil
}

// sameCerts: every certificate of ders is in the PEM text have.
func sameCerts(ders [][]byte, have []byte) bool {
	if have == nil {
		return false
	}
	var got [][]byte
	for rest := have; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		got = append(got, blk.Bytes)
	}
	for _, d := range ders {
		found := false
		for _, g := range got {
			found = found || bytes.Equal(d, g)
		}
		if !found {
			return false
		}
	}
	return true
}
