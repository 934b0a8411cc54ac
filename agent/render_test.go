package agent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// TestRenderIgnoresThisHostsKeyfiles: render plans for some other machine,
// so a keyfile of the same name on the machine it runs on (an admin's
// workstation) is no reason to refuse, while a real run on that machine
// refuses to replace it.
func TestRenderIgnoresThisHostsKeyfiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/NetworkManager/system-connections")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := []byte("[connection]\nid=mine\ntype=ethernet\n")
	if err := os.WriteFile(filepath.Join(dir, "eth0.nmconnection"), foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	nc := &protocol.NetworkConfig{
		Configurator: protocol.ConfiguratorNmconnections,
		IPAddresses:  map[string]string{"ip": "10.0.0.5"},
		Config:       map[string]protocol.RawValue{"eth0": {Value: "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n[ipv4]\nmethod=manual\naddress1={ip}/24\n"}},
	}
	var out bytes.Buffer
	if err := printRender(t.Context(), Options{DryRun: true, Out: &out, Root: root}, nc, apply.NmstateAuto, true, netpolicy.Policy{}); err != nil {
		t.Fatalf("render refused because of this host's keyfile: %v", err)
	}
	if !strings.Contains(out.String(), "address1=10.0.0.5/24") {
		t.Errorf("render output lacks the keyfile:\n%s", out.String())
	}

	// The same plan for this machine is refused, naming the file.
	e := newEnv(Options{DryRun: true, Out: &bytes.Buffer{}, Root: root})
	conf := &configured{cfg: &protocol.Config{}, apply: e.ownedApplier(apply.NmstateAuto, netpolicy.Policy{})}
	rd, err := apply.Render(nc)
	if err != nil {
		t.Fatal(err)
	}
	var notOurs *apply.NotOwnedError
	if _, err := e.plan(t.Context(), e.phase(PhasePlan, redactor{}), conf, state.State{}, &netConfig{config: nc, rendered: rd}, false); !errors.As(err, &notOurs) {
		t.Errorf("a plan for this machine replaced a foreign keyfile: %v", err)
	}
}

// PrintRenderOn (`agent render --root`) plans for the node under the root:
// the same keyfile is refused there, as a real run refuses it.
func TestRenderOnARootChecksItsDisk(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/NetworkManager/system-connections")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eth0.nmconnection"), []byte("[connection]\nid=mine\ntype=ethernet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nc := &protocol.NetworkConfig{
		Configurator: protocol.ConfiguratorNmconnections,
		IPAddresses:  map[string]string{"ip": "10.0.0.5"},
		Config:       map[string]protocol.RawValue{"eth0": {Value: "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n[ipv4]\nmethod=manual\naddress1={ip}/24\n"}},
	}
	var notOurs *apply.NotOwnedError
	if err := PrintRenderOn(t.Context(), &bytes.Buffer{}, root, nc, apply.NmstateAuto); !errors.As(err, &notOurs) {
		t.Fatalf("render --root: %v, want the keyfile refused as not ours", err)
	}
}
