package catrust

import (
	"crypto/x509"
	"encoding/asn1"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

const (
	regHost     = "reg.example"
	https       = "https://" + regHost + ":8443/elemental/registration/t"
	plain       = "http://" + regHost + "/elemental/registration/t"
	httpsByAddr = "https://10.1.2.3:8443/elemental/registration/t"
)

// trustAt is a Trust on a fresh root with pending (if any) already kept.
func trustAt(t *testing.T, pending string) (Trust, string) {
	t.Helper()
	root := t.TempDir()
	if pending != "" {
		if err := os.MkdirAll(filepath.Join(root, Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, PendingPath), []byte(pending), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Trust{Files: host.Root(root)}, root
}

func pendingOf(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, PendingPath))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func TestOfferRefusesWhatNothingVerified(t *testing.T) {
	oldCA, nextCA, sysCA := testpki.New(t, "old"), testpki.New(t, "new"), testpki.New(t, "system")
	old, next, third := string(oldCA.CertPEM()), string(nextCA.CertPEM()), string(testpki.New(t, "third").CertPEM())
	byOld, byNext, bySystem := oldCA.Chain(t, regHost), nextCA.Chain(t, regHost), sysCA.Chain(t, regHost)
	edited := func(name string, edit func(*x509.Certificate)) string {
		return string(testpki.NewWith(t, name, edit).CertPEM())
	}
	_, tenNet, _ := net.ParseCIDR("10.0.0.0/8")
	for _, c := range []struct {
		name, url, sent, pending, configCA string
		peer                               []*x509.Certificate
		refusal                            string
	}{
		{"plain http", plain, next, "", old, nil, "plain http"},
		{"a path, not PEM", https, "/etc/passwd", "", old, byOld, "no certificate"},
		{"not a CA", https, string(testpki.SelfSigned(t, "leaf")), "", old, byOld, "not a CA certificate"},
		{"too large", https, next + strings.Repeat("#", MaxPEM), "", old, byOld, "more than"},
		{"a server of the system pool", https, third, "", old, bySystem, "does not verify against the CA in force alone"},
		{"a second new CA over a conversation the pending CA verified", https, third, next, old, byNext, "does not verify against the CA in force alone"},
		{"no chain seen", https, next, "", old, nil, "presented no certificate"},
		{"no CA pinned", https, next, "", "", bySystem, "no CA is pinned"},
		{"expired", https, edited("expired", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
		}), "", old, byOld, "expired"},
		{"not yet valid", https, edited("future", func(c *x509.Certificate) { c.NotBefore = time.Now().Add(time.Hour) }), "", old, byOld, "not valid before"},
		{"no certificate signing", https, edited("nosign", func(c *x509.Certificate) { c.KeyUsage = x509.KeyUsageDigitalSignature }), "", old, byOld, "key usage"},
		{"DNS-constrained away", https, edited("constrained", func(c *x509.Certificate) {
			c.PermittedDNSDomains = []string{"other.example"}
		}), "", old, byOld, "name-constrained away from reg.example"},
		{"DNS-excluded", https, edited("excluded", func(c *x509.Certificate) { c.ExcludedDNSDomains = []string{".example"} }), "", old, byOld, "name-constrained"},
		{"clientAuth only", https, edited("client-only", func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}), "", old, byOld, "without serverAuth"},
		{"an unknown usage only", https, edited("unknown-usage", func(c *x509.Certificate) {
			c.UnknownExtKeyUsage = []asn1.ObjectIdentifier{{1, 3, 6, 1, 4, 1, 99999, 1}}
		}), "", old, byOld, "without serverAuth"},
		{"IP-excluded", httpsByAddr, edited("ip-excluded", func(c *x509.Certificate) { c.ExcludedIPRanges = []*net.IPNet{tenNet} }), "", old, oldCA.Chain(t, "10.1.2.3"), "name-constrained away from 10.1.2.3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, root := trustAt(t, c.pending)
			out, err := tr.Offer(c.url, c.sent, c.configCA, c.peer)
			if err == nil || !strings.Contains(err.Error(), c.refusal) || out != Unchanged {
				t.Fatalf("Offer: %v %v, want a refusal saying %q", out, err, c.refusal)
			}
			if got := pendingOf(t, root); got != c.pending {
				t.Errorf("pending CA changed by a refused offer: %q", got)
			}
		})
	}
}

// Constraints that leave the registration host in are no reason to refuse.
func TestOfferTakesAConstrainedCAThatCoversTheHost(t *testing.T) {
	oldCA := testpki.New(t, "old")
	_, tenNet, _ := net.ParseCIDR("10.0.0.0/8")
	for name, edit := range map[string]func(*x509.Certificate){
		"the host itself":   func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"REG.example"} },
		"a parent domain":   func(c *x509.Certificate) { c.PermittedDNSDomains = []string{".example"} },
		"another subdomain": func(c *x509.Certificate) { c.ExcludedDNSDomains = []string{"x.reg.example"} },
		"IP ranges only":    func(c *x509.Certificate) { c.PermittedIPRanges = []*net.IPNet{tenNet} },
	} {
		t.Run(name, func(t *testing.T) {
			tr, _ := trustAt(t, "")
			next := string(testpki.NewWith(t, "constrained", edit).CertPEM())
			if out, err := tr.Offer(https, next, string(oldCA.CertPEM()), oldCA.Chain(t, regHost)); out != Pending || err != nil {
				t.Fatalf("Offer: %v %v, want pending", out, err)
			}
		})
	}
}

func TestOfferKeepsANewCAAsPendingAndBundlesBoth(t *testing.T) {
	oldCA := testpki.New(t, "old")
	old, next := string(oldCA.CertPEM()), string(testpki.New(t, "new").CertPEM())
	byOld := oldCA.Chain(t, regHost)
	tr, root := trustAt(t, "")
	if b, err := tr.Bundle(old); err != nil || b != old {
		t.Fatalf("no rotation: bundle %q %v, want the config's CA as it is", b, err)
	}
	if out, err := tr.Offer(https, old, old, byOld); out != Unchanged || err != nil {
		t.Fatalf("the CA in force announced again: %v %v", out, err)
	}
	if out, err := tr.Offer(https, next, old, byOld); out != Pending || err != nil {
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
	if out, err := tr.Offer(https, next, old, byOld); out != Unchanged || err != nil {
		t.Errorf("the pending CA announced again: %v %v", out, err)
	}
}

// The server verified by the CA in force alone decides the rotation: a
// pending CA it no longer announces is dropped, one it replaces goes.
func TestOfferFollowsTheServerTheCAInForceVerified(t *testing.T) {
	oldCA := testpki.New(t, "old")
	old, next, third := string(oldCA.CertPEM()), string(testpki.New(t, "new").CertPEM()), string(testpki.New(t, "third").CertPEM())
	byOld := oldCA.Chain(t, regHost)
	for _, c := range []struct {
		name, sent, pending string
		out                 Outcome
	}{
		{"another new CA", third, third, Replaced},
		{"none announced", "", "", Dropped},
		{"the CA in force announced", old, "", Dropped},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, root := trustAt(t, next)
			out, err := tr.Offer(https, c.sent, old, byOld)
			if out != c.out || (out == Dropped) != (err != nil) {
				t.Fatalf("Offer: %v %v, want %v", out, err, c.out)
			}
			if got := pendingOf(t, root); got != c.pending {
				t.Errorf("pending CA %q, want %q", got, c.pending)
			}
		})
	}
}

// A pending CA that can never verify the server is dropped by the next
// run, so it blocks no later announcement.
func TestPromoteDropsAPendingCAThatCanNeverVerify(t *testing.T) {
	for name, edit := range map[string]func(*x509.Certificate){
		"expired since": func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute)
		},
		"name-constrained": func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"elsewhere.example"} },
		// Kept pending by an agent before the EKU rule: dropped now.
		"clientAuth only": func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} },
	} {
		t.Run(name, func(t *testing.T) {
			tr, root := trustAt(t, string(testpki.NewWith(t, "pending", edit).CertPEM()))
			out, err := tr.Promote(t.Context(), https)
			if out != Dropped || err == nil || !strings.Contains(err.Error(), "can never verify") {
				t.Fatalf("Promote: %v %v, want dropped", out, err)
			}
			if got := pendingOf(t, root); got != "" {
				t.Errorf("pending CA still kept: %q", got)
			}
		})
	}
}
