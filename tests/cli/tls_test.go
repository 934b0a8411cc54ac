package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
)

// The config's ca-cert path is read under --root, and a server whose
// certificate that CA did not sign ends the run with 78 at once.
func TestCAFromTheConfigIsReadUnderRootAndAnUnknownCAIs78(t *testing.T) {
	dir := t.TempDir()
	pki := testpki.New(t, "regserver").WriteFiles(t, dir, "127.0.0.1")
	cert, key := pki.Cert, pki.Key
	other := testpki.New(t, "someone-else").WriteFiles(t, dir, "127.0.0.1").CA
	rs := regserverWith(t, cliConfig, "--no-tpm", "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(rs.Base, "https://") {
		t.Fatalf("regserver is not serving TLS: %s", rs.Base)
	}
	const caPath = "/etc/nodereg-cli-test/ca.pem"
	for _, c := range []struct {
		ca   string
		code int
	}{{pki.CA, 0}, {other, 78}} {
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
