package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
)

// CAPEM is the PEM text of elemental.registration.ca-cert from the local
// config or a flag: the PEM text itself, or the host path of a regular file
// holding it (docs/protocol.md §1.3), read through files (the machine's, as
// --root has it) without following a symlink and at most safefile.MaxPEM
// bytes. It is the one loader for the CA: the TLS client and the
// system-agent kubeconfig use the same bytes, and a CA that cannot be read
// is an error, never its path passed on as data. With files nil only PEM
// text is taken. A ca-cert from the server is PEM text only
// (agent/localconfig.KeepLocal).
func CAPEM(files host.FS, caCert string) ([]byte, error) {
	if caCert == "" {
		return nil, errors.New("ca-cert: empty")
	}
	if IsCAPEM(caCert) {
		if err := safefile.CheckPEM([]byte(caCert)); err != nil {
			return nil, fmt.Errorf("ca-cert: %w", err)
		}
		return []byte(caCert), nil
	}
	if files == nil {
		return nil, fmt.Errorf("ca-cert: %q: a file name where PEM text is wanted (a file is read through the host edge: CAPEM)", caCert)
	}
	b, err := host.ReadPEM(files, caCert)
	if err != nil {
		return nil, fmt.Errorf("ca-cert: %w", err)
	}
	return b, nil
}

// IsCAPEM tells a registration.ca-cert holding PEM text from one naming a
// file (upstream's rule): callers that move the file (under a root) ask it.
func IsCAPEM(caCert string) bool { return strings.Contains(caCert, "-----BEGIN") }

// TLSConfig builds the client TLS configuration from a CA given as PEM
// text (a ca-cert naming a file is read first, through the host edge:
// CAPEM). A pinned CA is the only trust for that server: upstream
// adds it to the system pool, but then any certificate chaining to the
// system store (a TLS-inspection CA, a mis-issued public one) would speak
// for the registration server and could announce a CA of its own
// (docs/ca-rotation.md, "Trust"). Without a CA the system pool verifies,
// unless noSystemPool.
func TLSConfig(caCert string, noSystemPool bool) (*tls.Config, error) {
	if caCert == "" {
		if noSystemPool {
			return nil, errors.New("ca-cert: no CA given and the system pool is disabled")
		}
		return &tls.Config{MinVersion: tls.VersionTLS12}, nil
	}
	pemText, err := CAPEM(nil, caCert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemText) {
		return nil, errors.New("ca-cert: no certificate found in the PEM data")
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// ServerVerifyOptions are the options crypto/tls verifies a server's chain
// with for the client TLSConfig builds (RootCAs, no VerifyPeerCertificate):
// the pool, the chain's intermediates, the name dialled (ServerName, an IP
// address included) and the time, with x509's default key usage,
// serverAuth. Whatever judges a CA by what the dial will accept
// (agent/catrust) verifies with these, so the two cannot part.
func ServerVerifyOptions(roots, intermediates *x509.CertPool, serverName string, now time.Time) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: serverName, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

// PeerCertificates is the chain the server presented, leaf first; nil over
// plain http. A CA announced over this connection is taken only when this
// chain verifies against the CA in force alone (agent/catrust).
func (cc *ClientConn) PeerCertificates() []*x509.Certificate {
	tc, ok := cc.c.ws.NetConn().(*tls.Conn)
	if !ok {
		return nil
	}
	return tc.ConnectionState().PeerCertificates
}
