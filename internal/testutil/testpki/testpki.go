// Package testpki is the tests' own PKI: a CA, the server certificates it
// signs, and the PEM files a regserver is started with (docs/ca-rotation.md
// is what the callers exercise). ECDSA P-256 throughout. Only tests import it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed CA certificate and its key.
type CA struct {
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// New makes a CA whose common name is name, valid from an hour ago for a day.
func New(t testing.TB, name string) *CA {
	t.Helper()
	return NewWith(t, name, nil)
}

// NewWith is New with edit applied to the CA's template before it is
// signed: a CA expired, name-constrained, without the right key usage.
func NewWith(t testing.TB, name string, edit func(*x509.Certificate)) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign|x509.KeyUsageCRLSign
	if edit != nil {
		edit(tmpl)
	}
	der := create(t, tmpl, tmpl, key, key)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{name: name, cert: cert, key: key, pem: encode("CERTIFICATE", der)}
}

// CertPEM is the CA certificate, PEM-encoded.
func (c *CA) CertPEM() []byte { return c.pem }

// IssuePEM signs a server certificate for hosts (IP addresses or DNS
// names) and returns it and its PKCS#8 key, PEM-encoded.
func (c *CA) IssuePEM(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	return c.IssueWindowPEM(t, now.Add(-time.Hour), now.Add(24*time.Hour), hosts...)
}

// IssueWindowPEM is IssuePEM for a certificate valid from notBefore to
// notAfter: an expired one, or one not valid yet.
func (c *CA) IssueWindowPEM(t testing.TB, notBefore, notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, "server "+c.name)
	tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der := create(t, tmpl, c.cert, key, c.key)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return encode("CERTIFICATE", der), encode("PRIVATE KEY", keyDER)
}

// Issue is IssuePEM as a certificate a tls.Config can serve.
func (c *CA) Issue(t testing.TB, hosts ...string) tls.Certificate {
	t.Helper()
	return KeyPair(t)(c.IssuePEM(t, hosts...))
}

// KeyPair turns PEM certificate and key into what a tls.Config serves,
// failing t on a bad pair.
func KeyPair(t testing.TB) func(certPEM, keyPEM []byte) tls.Certificate {
	return func(certPEM, keyPEM []byte) tls.Certificate {
		t.Helper()
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
}

// Chain is a server certificate for hosts as a TLS client sees it: the
// parsed chain, leaf first.
func (c *CA) Chain(t testing.TB, hosts ...string) []*x509.Certificate {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Issue(t, hosts...).Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return []*x509.Certificate{leaf}
}

// Files are the paths WriteFiles wrote.
type Files struct {
	CA   string // the CA certificate
	Cert string // the server certificate
	Key  string // its key
}

// WriteFiles writes the CA certificate and a server certificate for hosts
// with its key under dir, as <name>-ca.pem, <name>-server.pem and
// <name>-server.key (mode 0600).
func (c *CA) WriteFiles(t testing.TB, dir string, hosts ...string) Files {
	t.Helper()
	f := Files{
		CA:   filepath.Join(dir, c.name+"-ca.pem"),
		Cert: filepath.Join(dir, c.name+"-server.pem"),
		Key:  filepath.Join(dir, c.name+"-server.key"),
	}
	certPEM, keyPEM := c.IssuePEM(t, hosts...)
	for p, b := range map[string][]byte{f.CA: c.pem, f.Cert: certPEM, f.Key: keyPEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// SelfSigned is a self-signed certificate that is not a CA (basic
// constraints present, CA false), PEM-encoded.
func SelfSigned(t testing.TB, name string) []byte {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	return encode("CERTIFICATE", create(t, tmpl, tmpl, key, key))
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// template has a random serial, so certificates never share one.
func template(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), BasicConstraintsValid: true}
}

func create(t testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func encode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
