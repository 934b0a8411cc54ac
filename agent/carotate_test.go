package agent

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
)

// A rotation as an operator does it: the server announces the new CA
// while still presenting a certificate of the old one (both), then
// switches to a certificate of the new one. The node registers at every
// step, trusts both in between, and the old one no longer afterwards; a
// CA nobody announced is refused throughout.
func TestCARotationKeepsTheNodeRegistering(t *testing.T) {
	oldCA, newCA, rogue, thirdCA, fourthCA := testpki.New(t, "old"), testpki.New(t, "new"), testpki.New(t, "rogue"), testpki.New(t, "third"), testpki.New(t, "fourth")
	var presented atomic.Pointer[tls.Certificate]
	var announced atomic.Pointer[string]
	s := &scriptedServer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !protocol.IsWebSocketUpgrade(r) {
			return
		}
		reply := &protocol.ConfigReply{}
		reply.Config.Elemental.Registration.CACert = *announced.Load()
		s.script = script{gets: []answer{{reply: reply}}}
		_ = protocol.Accept(w, r, protocol.ServerOptions{Auth: []protocol.ServerAuthenticator{protocol.PlainServer{}}, Log: testutil.TestLog(t)}, s)
	})
	srv := httptest.NewUnstartedServer(h)
	// No SNI for an IP address: the certificate is chosen per connection.
	srv.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return &tls.Config{Certificates: []tls.Certificate{*presented.Load()}}, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)

	m := node.New(t, "52:54:00:aa:00:27", srv.URL+"/elemental/registration/token", "    no-smbios: true\n    ca-cert: /etc/reg-ca.pem\n")
	testutil.Must(t, os.MkdirAll(filepath.Join(m.Root, "etc"), 0o755))
	testutil.Must(t, os.WriteFile(filepath.Join(m.Root, "etc/reg-ca.pem"), oldCA.CertPEM(), 0o644))
	run := func() error {
		_, err := Run(t.Context(), Options{Root: m.Root, Clock: retrytest.NewClock(time.Now()), Deadline: 5 * time.Second, SessionDeadline: 3 * time.Second})
		return err
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(m.Root, p))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
	step := func(name string, cert *testpki.CA, ann string, wantPending, wantCurrent string) {
		t.Helper()
		leaf := cert.Issue(t, "127.0.0.1")
		presented.Store(&leaf)
		announced.Store(&ann)
		if err := run(); err != nil {
			t.Fatalf("%s: the node stopped registering: %v", name, err)
		}
		if got := read(catrust.PendingPath); got != wantPending {
			t.Errorf("%s: pending CA %q, want %q", name, got, wantPending)
		}
		if got := read(catrust.CurrentPath); got != wantCurrent {
			t.Errorf("%s: CA in force %q, want %q", name, got, wantCurrent)
		}
	}
	refused := func(name string, cert *testpki.CA) {
		t.Helper()
		leaf := cert.Issue(t, "127.0.0.1")
		presented.Store(&leaf)
		if err := run(); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: a server presenting that certificate was not refused: %v", name, err)
		}
	}

	step("old", oldCA, string(oldCA.CertPEM()), "", "")
	refused("old, rogue CA unannounced", rogue)
	step("both: new CA announced", oldCA, string(newCA.CertPEM()), string(newCA.CertPEM()), "")
	// The server the old CA alone verified changes its mind: the CA it
	// announces now replaces the pending one, and back again.
	step("both: a second CA announced", oldCA, string(thirdCA.CertPEM()), string(thirdCA.CertPEM()), "")
	step("both: the new CA announced again", oldCA, string(newCA.CertPEM()), string(newCA.CertPEM()), "")
	refused("both, rogue CA unannounced", rogue)
	step("new: certificate of the new CA", newCA, string(newCA.CertPEM()), "", string(newCA.CertPEM()))
	step("new, again", newCA, string(newCA.CertPEM()), "", string(newCA.CertPEM()))
	// A pending CA that can never verify (it expired since it was kept)
	// blocks nothing: the next run drops it and takes the announcement.
	expired := testpki.NewWith(t, "expired", func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	testutil.Must(t, os.WriteFile(filepath.Join(m.Root, catrust.PendingPath), expired.CertPEM(), 0o600))
	step("new: an expired pending CA dropped, the next one taken", newCA, string(fourthCA.CertPEM()), string(fourthCA.CertPEM()), string(newCA.CertPEM()))
	refused("new: the old CA is dropped", oldCA)
	if fi, err := os.Stat(filepath.Join(m.Root, catrust.CurrentPath)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("CA in force: %v %v, want mode 0600", fi, err)
	}
}

// A CA announced over plain http is not taken: nothing verified it.
func TestCAOverPlainHTTPIsRefused(t *testing.T) {
	next := testpki.New(t, "new")
	reply := &protocol.ConfigReply{}
	reply.Config.Elemental.Registration.CACert = string(next.CertPEM())
	s := &scriptedServer{script: script{gets: []answer{{reply: reply}}}}
	url := s.start(t)
	old := testpki.New(t, "old")
	m := node.New(t, "52:54:00:aa:00:28", url, "    no-smbios: true\n    ca-cert: |\n"+indent(string(old.CertPEM()), "      "))
	var lg testutil.Log
	if _, err := Run(t.Context(), Options{Root: m.Root, Clock: retrytest.NewClock(time.Now()), Deadline: 5 * time.Second, Log: lg.Entry()}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Root, catrust.PendingPath)); !os.IsNotExist(err) {
		t.Errorf("a CA that came over plain http was kept: %v", err)
	}
	if !strings.Contains(lg.String(), "plain http") {
		t.Errorf("the refusal is not logged:\n%s", lg.String())
	}
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+by) + "\n"
}
