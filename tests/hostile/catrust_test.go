package hostile

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

// announcing is a MsgConfig payload whose registration.ca-cert is ca.
func announcing(ca []byte) []byte {
	return []byte("elemental:\n    registration:\n        auth: mac\n        ca-cert: |\n" +
		"            " + strings.ReplaceAll(strings.TrimRight(string(ca), "\n"), "\n", "\n            ") + "\n")
}

// peerSwitch serves, on one https address, the registration server the
// test chooses: the certificate of its first handshake (the conversation)
// and of every later one (a proving handshake) can differ, as an attacker
// holding two keys would arrange.
type peerSwitch struct {
	server      atomic.Pointer[Server]
	first, then atomic.Pointer[tls.Certificate]
	handshakes  atomic.Int32
}

func (p *peerSwitch) become(s *Server, first, then tls.Certificate) {
	p.server.Store(s)
	p.first.Store(&first)
	p.then.Store(&then)
	p.handshakes.Store(0)
}

func (p *peerSwitch) start(t *testing.T) string {
	t.Helper()
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.server.Load().ServeHTTP(w, r)
	}))
	hs.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := p.then.Load()
		if p.handshakes.Add(1) == 1 {
			c = p.first.Load()
		}
		return &tls.Config{Certificates: []tls.Certificate{*c}}, nil
	}}
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return hs.URL + "/elemental/registration/tok"
}

// TestPinnedCAIsTheOnlyTrust: a node pinning its server's CA, with a
// system pool (SSL_CERT_FILE) holding a CA that signed a hostile server's
// certificate. The hostile server, at the node's URL, announces a CA of
// its own and presents a certificate of that CA to every later handshake.
// The node refuses it (exit 78), takes nothing, and the real server is
// never locked out, during a rotation too (docs/ca-rotation.md, "Trust").
func TestPinnedCAIsTheOnlyTrust(t *testing.T) {
	// Parallel: the trust store is the binary's environment (cmd.Env), not
	// this process's.
	t.Parallel()
	bin := testbin.Build(t, "./cmd/agent")
	real, system, own, next := testpki.New(t, "real"), testpki.New(t, "system"), testpki.New(t, "hostile"), testpki.New(t, "real-next")
	sysFile := filepath.Join(t.TempDir(), "system.pem")
	testutil.Must(t, os.WriteFile(sysFile, system.CertPEM(), 0o644))
	env := []string{"SSL_CERT_FILE=" + sysFile, "SSL_CERT_DIR=" + t.TempDir()}
	var p peerSwitch
	url := p.start(t)
	hostile := func() {
		p.become(&Server{Config: announcing(own.CertPEM())}, system.Issue(t, "127.0.0.1"), own.Issue(t, "127.0.0.1"))
	}
	legit := func(announced *testpki.CA, serving *testpki.CA) {
		c := serving.Issue(t, "127.0.0.1")
		p.become(&Server{Config: announcing(announced.CertPEM())}, c, c)
	}
	run := func(m *node.Machine) (int, string) {
		code, _, final := runBinary(t, bin, env, "--root", m.Root, "--deadline", "5s", "--network-timeout", "5s")
		return code, final
	}

	// The control: with no CA pinned the system pool verifies the hostile
	// server (SSL_CERT_FILE is in force), and its CA is still not taken.
	hostile()
	free := node.New(t, "52:54:00:29:01:01", url, "")
	if code, final := run(free); code != 0 {
		t.Fatalf("no CA pinned: exit %d (%s), want 0: the system pool of SSL_CERT_FILE is not in use", code, final)
	}
	noRotation(t, free, "no CA pinned")

	m := node.New(t, "52:54:00:29:01:02", url, "    ca-cert: /etc/reg-ca.pem\n")
	testutil.Must(t, os.MkdirAll(filepath.Join(m.Root, "etc"), 0o755))
	testutil.Must(t, os.WriteFile(filepath.Join(m.Root, "etc/reg-ca.pem"), real.CertPEM(), 0o644))
	for i := range 2 {
		hostile()
		code, final := run(m)
		wantFinal(t, code, 78, final, "certificate verification", "not registered")
		noRotation(t, m, "hostile server, run "+string(rune('1'+i)))
		legit(real, real)
		if code, final := run(m); code != 0 {
			t.Fatalf("the real server after the hostile one: exit %d (%s), want 0", code, final)
		}
	}

	// A rotation under way: the pending CA is the real server's next one.
	legit(next, real)
	if code, final := run(m); code != 0 {
		t.Fatalf("rotation announced: exit %d (%s)", code, final)
	}
	hostile()
	code, final := run(m)
	wantFinal(t, code, 78, final, "certificate verification")
	if got := readUnder(t, m, catrust.PendingPath); got != string(next.CertPEM()) {
		t.Errorf("the hostile server changed the pending CA: %q", got)
	}
	legit(next, next)
	if code, final := run(m); code != 0 {
		t.Fatalf("the real server on its new CA: exit %d (%s), want 0", code, final)
	}
	if got := readUnder(t, m, catrust.CurrentPath); got != string(next.CertPEM()) {
		t.Errorf("CA in force after the rotation %q, want the real server's new CA", got)
	}
}

func readUnder(t *testing.T, m *node.Machine, p string) string {
	t.Helper()
	b, err := os.ReadFile(host.Root(m.Root).Path(p))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func noRotation(t *testing.T, m *node.Machine, label string) {
	t.Helper()
	if ents, err := os.ReadDir(host.Root(m.Root).Path(catrust.Dir)); err == nil && len(ents) > 0 {
		t.Errorf("%s: %s holds %d files, want nothing taken", label, catrust.Dir, len(ents))
	}
}
