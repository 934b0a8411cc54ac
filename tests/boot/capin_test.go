//go:build bootsim

package boot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

// A node pinning its server's CA, with a system pool (SSL_CERT_FILE) that
// holds a CA which signed a hostile server's certificate for the node's
// URL (docs/ca-rotation.md, "Trust"): the real regserver at each boot, a
// hostile one in between that announces a CA of its own and then serves a
// certificate of it. The hostile server is refused with exit 78 each time,
// nothing is kept under /oem/nodereg/ca, and the real server is never
// locked out.
func TestCAPinnedAgainstTheSystemPool(t *testing.T) {
	r, m := keyfileNode(t, "CA pinned: a server of the system pool cannot take the trust")
	certs := t.TempDir()
	real, system, own := testpki.New(t, "real"), testpki.New(t, "system"), testpki.New(t, "hostile-own")
	realF, systemF, ownF := real.WriteFiles(t, certs, serverIP), system.WriteFiles(t, certs, serverIP), own.WriteFiles(t, certs, serverIP)
	env := []string{"SSL_CERT_FILE=" + systemF.CA, "SSL_CERT_DIR=" + t.TempDir()}
	must(t, os.WriteFile(m.path("oem/registration/real-ca.pem"), real.CertPEM(), 0o600))
	m.writeHTTPSConfig("/oem/registration/real-ca.pem")

	m.startTLSServer(realF, realF)
	m.registerStep(r, "real", true, "")
	pool := m.poolOnNIC()
	hostile := func(label string, serving testpki.Files) {
		t.Helper()
		m.startTLSServer(serving, ownF)
		res := m.runAgent(env)
		if res.code != 78 || !strings.Contains(lastLine(res.out), "certificate verification") {
			t.Errorf("%s: agent exit %d (%s), want 78, certificate verification", label, res.code, lastLine(res.out))
		}
		if got := m.caFiles(); len(got) != 0 {
			t.Errorf("%s: %s holds %v, want nothing taken", label, caDir, got)
		}
	}
	hostile("hostile, a certificate of the system pool", systemF)
	hostile("hostile, a certificate of its own CA", ownF)

	m.startTLSServer(realF, realF)
	start := m.boot(active, false)
	r.boot("real after the hostile ones", m.waitAddr(start, pool))
	if res := m.runAgent(env); res.code != 0 || !strings.Contains(lastLine(res.out), "registration complete") {
		t.Fatalf("the real server after the hostile ones: exit %d (%s), want 0", res.code, lastLine(res.out))
	}
	if _, err := os.Stat(filepath.Join(m.root, caDir)); err == nil {
		if got := m.caFiles(); len(got) != 0 {
			t.Errorf("after the real server: %s holds %v", caDir, got)
		}
	}
}
