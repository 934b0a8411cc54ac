//go:build bootsim

package boot

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

// The rotated-CA files under the node's /oem (docs/ca-rotation.md).
const (
	caDir     = "oem/nodereg/ca"
	caCurrent = caDir + "/current.pem"
	caPending = caDir + "/pending.pem"
)

// startTLSServer restarts regserver on the lab's store serving https with
// serving's certificate and announcing announced's CA as
// registration.ca-cert. No admin listener: the case reads the node only.
func (l *lab) startTLSServer(serving, announced testpki.Files) {
	l.t.Helper()
	l.restartServer("", "--listen", net.JoinHostPort(serverIP, port),
		"--tls-cert", serving.Cert, "--tls-key", serving.Key, "--ca-cert", announced.CA)
	if !strings.HasPrefix(l.reg.Base, "https://") {
		l.t.Fatalf("regserver listens on %s, not https:\n%s", l.reg.Base, l.regTail())
	}
}

// writeHTTPSConfig is the node's registration config: the https URL of the
// lab's regserver and ca-cert, a path under the node's root.
func (m *machine) writeHTTPSConfig(caPath string) {
	m.t.Helper()
	u := strings.Replace(m.url(), "http://", "https://", 1)
	text := "elemental:\n  registration:\n    url: " + u + "\n    auth: mac\n    ca-cert: " + caPath + "\n"
	p := m.path("oem/registration/config.yaml")
	must(m.t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(m.t, os.WriteFile(p, []byte(text), 0o600))
}

// lastLine is the last non-empty line of the agent's output.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// caFiles lists the rotated-CA directory's entries with their modes.
func (m *machine) caFiles() map[string]os.FileMode {
	m.t.Helper()
	ents, err := os.ReadDir(m.path(caDir))
	if os.IsNotExist(err) {
		return nil
	}
	must(m.t, err)
	out := map[string]os.FileMode{}
	for _, e := range ents {
		fi, err := e.Info()
		must(m.t, err)
		out[e.Name()] = fi.Mode().Perm()
	}
	return out
}

// registerStep boots the machine (the pool address from /oem after the
// first) and runs the agent, which must register.
func (m *machine) registerStep(r *report, label string, first bool, want string) {
	m.t.Helper()
	start := m.boot(active, first)
	if !first {
		r.boot(label, m.waitAddr(start, want))
	}
	res := m.runAgent(nil)
	if res.code != 0 {
		m.t.Fatalf("%s: agent exit %d, want 0 (registered)", label, res.code)
	}
	if ll := lastLine(res.out); !strings.Contains(ll, "registration complete") {
		m.t.Errorf("%s: final line %q, want it to say registration complete", label, ll)
	}
}

// poolOnNIC is the pool address the first run put on the NIC, in place of
// the bootstrap one (regserver's admin API is not up in this case).
func (m *machine) poolOnNIC() string {
	m.t.Helper()
	var got []string
	waitFor(m.t, "the pool address alone on "+nodeIf, func() bool {
		got = m.addrs()
		// pool-a is 10.231.0.100-120: the bootstrap (.2) is not in it.
		return len(got) == 1 && strings.HasPrefix(got[0], "10.231.0.1")
	}, m.diag)
	return got[0]
}

// CA rotation across boots (docs/ca-rotation.md): regserver serves a
// CA-old certificate, then still CA-old while announcing CA-new, then a
// CA-new certificate; the node registers at each boot and ends trusting
// CA-new alone; a server with a certificate of a never-announced CA, and
// then one of the dropped CA-old, are refused with exit 78.
func TestCARotationAcrossBoots(t *testing.T) {
	r, m := keyfileNode(t, "CA rotation: old, both, new; stranger refused")
	certs := t.TempDir()
	caOld, caNew, caThird := testpki.New(t, "ca-old"), testpki.New(t, "ca-new"), testpki.New(t, "ca-third")
	// regserver's files: each CA and a certificate it signed for serverIP
	// (the address in the node's URL).
	old, next, third := caOld.WriteFiles(t, certs, serverIP), caNew.WriteFiles(t, certs, serverIP), caThird.WriteFiles(t, certs, serverIP)
	// The install put CA-old beside the config.
	must(t, os.WriteFile(m.path("oem/registration/ca-old.pem"), caOld.CertPEM(), 0o600))
	m.writeHTTPSConfig("/oem/registration/ca-old.pem")

	// Step 1: CA-old serves and is the one announced: nothing to rotate.
	m.startTLSServer(old, old)
	m.registerStep(r, "old", true, "")
	if got := m.caFiles(); len(got) != 0 {
		t.Fatalf("old: %s holds %v, want nothing (the announced CA is the one in force)", caDir, got)
	}
	pool := m.poolOnNIC()

	// Step 2: CA-old still serves, CA-new announced: kept as pending.
	m.startTLSServer(old, next)
	m.registerStep(r, "both", false, pool)
	if got := m.caFiles(); len(got) != 1 || got["pending.pem"] != 0o600 {
		t.Fatalf("both: %s holds %v, want only pending.pem 0600", caDir, got)
	}
	if got := m.read(caPending); !bytes.Equal(got, caNew.CertPEM()) {
		t.Errorf("both: pending.pem is not CA-new:\n%s", got)
	}

	// Step 3: CA-new serves: the node connects (both trusted), the pending
	// CA verifies the server alone and becomes the only one in force.
	m.startTLSServer(next, next)
	m.registerStep(r, "new", false, pool)
	if got := m.caFiles(); len(got) != 1 || got["current.pem"] != 0o600 {
		t.Fatalf("new: %s holds %v, want only current.pem 0600", caDir, got)
	}
	if got := m.read(caCurrent); !bytes.Equal(got, caNew.CertPEM()) {
		t.Errorf("new: current.pem is not CA-new:\n%s", got)
	}
	if fi, err := os.Stat(m.path(caDir)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("new: %s: %v, mode %v, want 0700", caDir, err, fi.Mode().Perm())
	}

	// A stranger: a CA never announced (it announces itself, which a failed
	// handshake never gets to); then CA-old, no longer trusted.
	for _, s := range []struct {
		label string
		ca    testpki.Files
	}{{"third CA", third}, {"old CA after the rotation", old}} {
		m.startTLSServer(s.ca, s.ca)
		res := m.runAgent(nil)
		if res.code != 78 {
			t.Errorf("%s: agent exit %d, want 78 (certificate verification)", s.label, res.code)
		}
		if ll := lastLine(res.out); !strings.Contains(ll, "certificate verification") || !strings.Contains(ll, "not registered") {
			t.Errorf("%s: final line %q, want certificate verification and not registered", s.label, ll)
		}
		if got := m.caFiles(); len(got) != 1 || got["current.pem"] != 0o600 {
			t.Errorf("%s: %s holds %v, want only current.pem 0600", s.label, caDir, got)
		}
		if got := m.read(caCurrent); !bytes.Equal(got, caNew.CertPEM()) {
			t.Errorf("%s: current.pem changed:\n%s", s.label, got)
		}
	}
}
