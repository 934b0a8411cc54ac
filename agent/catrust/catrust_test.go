package catrust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
)

func certPEM(t *testing.T, cn string, isCA bool) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestOfferRefusesWhatNothingVerified(t *testing.T) {
	old, next, third := certPEM(t, "old", true), certPEM(t, "new", true), certPEM(t, "third", true)
	const https, plain = "https://reg.example:8443/elemental/registration/t", "http://reg.example/elemental/registration/t"
	for _, c := range []struct {
		name, url, sent, pending, configCA, refusal string
	}{
		{"plain http", plain, next, "", old, "plain http"},
		{"a path, not PEM", https, "/etc/passwd", "", old, "no certificate"},
		{"not a CA", https, certPEM(t, "leaf", false), "", old, "not a CA certificate"},
		{"too large", https, next + strings.Repeat("#", MaxPEM), "", old, "more than"},
		{"a second new CA while one is pending", https, third, next, old, "rotation is under way"},
		{"no CA pinned", https, next, "", "", "no CA is pinned"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			tr := Trust{Files: host.Root(root)}
			if c.pending != "" {
				if err := os.MkdirAll(filepath.Join(root, Dir), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, PendingPath), []byte(c.pending), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out, err := tr.Offer(c.url, c.sent, c.configCA)
			if err == nil || !strings.Contains(err.Error(), c.refusal) || out != Unchanged {
				t.Fatalf("Offer: %v %v, want a refusal saying %q", out, err, c.refusal)
			}
			if b, _ := os.ReadFile(filepath.Join(root, PendingPath)); string(b) != c.pending {
				t.Errorf("pending CA changed by a refused offer: %q", b)
			}
		})
	}
}

func TestOfferKeepsANewCAAsPendingAndBundlesBoth(t *testing.T) {
	old, next := certPEM(t, "old", true), certPEM(t, "new", true)
	root := t.TempDir()
	tr := Trust{Files: host.Root(root)}
	if b, err := tr.Bundle(old); err != nil || b != old {
		t.Fatalf("no rotation: bundle %q %v, want the config's CA as it is", b, err)
	}
	if out, err := tr.Offer("https://reg.example/r", old, old); out != Unchanged || err != nil {
		t.Fatalf("the CA in force announced again: %v %v", out, err)
	}
	if out, err := tr.Offer("https://reg.example/r", next, old); out != Pending || err != nil {
		t.Fatalf("new CA: %v %v, want pending", out, err)
	}
	fi, err := os.Stat(filepath.Join(root, PendingPath))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pending CA: %v %v, want mode 0600", fi, err)
	}
	b, err := tr.Bundle(old)
	if err != nil || !strings.Contains(b, strings.TrimSpace(old)) || !strings.Contains(b, strings.TrimSpace(next)) {
		t.Errorf("bundle during the rotation lacks one of the CAs: %v\n%s", err, b)
	}
	if out, err := tr.Offer("https://reg.example/r", next, old); out != Unchanged || err != nil {
		t.Errorf("the pending CA announced again: %v %v", out, err)
	}
}
