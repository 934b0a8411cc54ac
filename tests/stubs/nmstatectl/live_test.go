package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/nmlab"
)

// TestLiveDescription: gc's [user] nmstate.interface.description reaches
// NetworkManager's own keyfile (nmcli has no "user" setting: D-Bus), and the
// profile keeps NetworkManager's format; no transcript applies one, so
// this is the translator's keyfile carried over, not a recorded byte.
func TestLiveDescription(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and NetworkManager")
	}
	lab := nmlab.Start(t, "the live description test", func(p *labkit.Pair) { nmlab.Veth(t, p, "eth0") })
	in := strings.Replace(load(t, "22-apply-memory-only").stdin, "eth1", "eth0", 1)
	in = strings.Replace(in, "  type: ethernet\n", "  type: ethernet\n  description: Main-NIC\n", 1)
	r := callEnv(t, standInEnv(lab.BusEnv), in, "apply", "-")
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(lab.Etc, "eth0.nmconnection"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\n[user]\nnmstate.interface.description=Main-NIC\n", "\naddress1=198.51.100.10/24\n", "\n[proxy]\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("NetworkManager's keyfile lacks %q:\n%s", want, b)
		}
	}
	if !strings.Contains(r.stdout, "description: Main-NIC") {
		t.Errorf("apply's output lacks the description:\n%s", r.stdout)
	}
}
