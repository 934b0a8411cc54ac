package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/testutil"
)

// An image's or admin's keyfile that carries the name nmstate gives the
// server's config (enp1s0.nmconnection) is not ours: the run refuses with
// 78 naming it, writes no applicator, and neither the failed run nor a
// later --reset-network touches the file.
func TestForeignKeyfileOfTheSameNameIsNeverTouched(t *testing.T) {
	rs := startRegServer(t, serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate), 0)
	m := newMachine(t, "52:54:00:00:45:02", rs.url())
	rel := "etc/NetworkManager/system-connections/enp1s0.nmconnection"
	foreign := filepath.Join(m.Root, rel)
	const content = "[connection]\nid=image-enp1s0\ntype=ethernet\ninterface-name=enp1s0\n\n[ipv4]\nmethod=auto\n"
	testutil.Must(t, os.MkdirAll(filepath.Dir(foreign), 0o755))
	testutil.Must(t, os.WriteFile(foreign, []byte(content), 0o600))

	_, err := m.run(nil)
	if err == nil || exitcode.Of(err) != exitcode.Config {
		t.Fatalf("run over a foreign keyfile: %v (exit %d), want exit 78", err, exitcode.Of(err))
	}
	if !strings.Contains(err.Error(), "/"+rel) || !strings.Contains(err.Error(), "not ours") {
		t.Errorf("error %q does not name /%s as not ours", err, rel)
	}
	if _, err := os.Stat(filepath.Join(m.Root, applicator)); !os.IsNotExist(err) {
		t.Errorf("applicator written by a refused run: %v", err)
	}
	assertContent(t, foreign, content, "after the refused run")

	t.Setenv("NODEREG_NMCLI", "/bin/true")
	if err := agent.ResetNetwork(t.Context(), m.options(nil)); err != nil {
		t.Fatal(err)
	}
	assertContent(t, foreign, content, "after --reset-network")
}

func assertContent(t *testing.T, p, want, when string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != want {
		t.Errorf("%s: %s is %q (%v), want it untouched", when, p, b, err)
	}
}
