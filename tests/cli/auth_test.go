package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

// A node sending auth mac to a registration that takes TPM only: regserver
// closes without a word, as upstream does. The agent logs the identity it
// sent (MAC and machine hash), names the mismatch on the failure line, and
// its last line leads with the cause, not a timeout.
func TestAuthKindMismatchIsNamedAndLeadsTheLastLine(t *testing.T) {
	// Parallel: it waits out its 2 s deadline on processes of its own
	// (environment in cmd.Env), beside the demo.
	t.Parallel()
	rs := regserverWith(t, "registrations:\n- name: tpm-only\n  token: tpm-token\n  config:\n    elemental:\n      registration:\n        auth: tpm\n")
	const mac = "52:54:00:00:0e:05"
	m := node.New(t, mac, rs.URL("tpm-token"), "")
	r := agent(t, "agent", nil, "--root", m.Root, "--deadline", "2s")
	if r.code != 75 {
		t.Fatalf("exit %d, want 75\n%s", r.code, r.stderr)
	}
	sum := sha256.Sum256([]byte(mac))
	if !strings.Contains(r.stderr, `msg="PLAIN identity"`) || !strings.Contains(r.stderr, "mac=\""+mac+"\"") && !strings.Contains(r.stderr, "mac="+mac) ||
		!strings.Contains(r.stderr, "machine="+hex.EncodeToString(sum[:])) {
		t.Errorf("no PLAIN identity line with the MAC and machine hash:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "auth kind mismatch? the server closed the connection before any challenge: check that the registration's elemental.registration.auth is mac") {
		t.Errorf("the failure does not name the mismatch:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `msg="authentication refused (auth kind mismatch?): not registered: try again later" exit=75`) {
		t.Errorf("last line %q does not lead with the cause", last)
	}
}
