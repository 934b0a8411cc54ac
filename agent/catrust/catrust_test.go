package catrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

func TestOfferRefusesWhatNothingVerified(t *testing.T) {
	old, next, third := string(testpki.New(t, "old").CertPEM()), string(testpki.New(t, "new").CertPEM()), string(testpki.New(t, "third").CertPEM())
	const https, plain = "https://reg.example:8443/elemental/registration/t", "http://reg.example/elemental/registration/t"
	for _, c := range []struct {
		name, url, sent, pending, configCA, refusal string
	}{
		{"plain http", plain, next, "", old, "plain http"},
		{"a path, not PEM", https, "/etc/passwd", "", old, "no certificate"},
		{"not a CA", https, string(testpki.SelfSigned(t, "leaf")), "", old, "not a CA certificate"},
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
	old, next := string(testpki.New(t, "old").CertPEM()), string(testpki.New(t, "new").CertPEM())
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
