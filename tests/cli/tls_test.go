package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// into dir and returns their paths.
func selfSigned(t *testing.T, dir, name string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	node.Must(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	node.Must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	node.Must(t, err)
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	node.Must(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	node.Must(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certPath, keyPath
}

// The config's ca-cert path is read under --root, and a server whose
// certificate that CA did not sign ends the run with 78 at once.
func TestCAFromTheConfigIsReadUnderRootAndAnUnknownCAIs78(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "regserver")
	other, _ := selfSigned(t, dir, "someone-else")
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte("registrations:\n- name: cli\n  token: cli-token\n  config:\n    elemental:\n      registration:\n        auth: mac\n"), 0o600))
	rs := node.StartRegserver(t, nil, testbin.Build(t, "./cmd/regserver"), "--config", cfg, "--listen", "127.0.0.1:0",
		"--no-tpm", "--network-wait", "0", "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(rs.Base, "https://") {
		t.Fatalf("regserver is not serving TLS: %s", rs.Base)
	}
	const caPath = "/etc/nodereg-cli-test/ca.pem"
	for _, c := range []struct {
		ca   string
		code int
	}{{cert, 0}, {other, 78}} {
		m := node.New(t, "52:54:00:00:0e:09", rs.URL("cli-token"), "    ca-cert: "+caPath+"\n")
		b, err := os.ReadFile(c.ca)
		node.Must(t, err)
		node.Must(t, os.MkdirAll(filepath.Join(m.Root, filepath.Dir(caPath)), 0o755))
		node.Must(t, os.WriteFile(filepath.Join(m.Root, caPath), b, 0o644))
		r := agent(t, "agent", nil, "--root", m.Root, "--deadline", "10m")
		if r.code != c.code {
			t.Errorf("CA %s: exit %d, want %d\n%s", filepath.Base(c.ca), r.code, c.code, r.stderr)
		}
		if strings.Contains(r.stderr, "retrying in") {
			t.Errorf("CA %s: retried:\n%s", filepath.Base(c.ca), r.stderr)
		}
	}
}
