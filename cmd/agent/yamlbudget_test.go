package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

// TestRenderInputsHeldToOneYAMLBudget: render -f's MachineRegistration and
// render --bootstrap -f's cloud-config (with the drop-in inside one of its
// files) are held to one alias and node budget for the whole input, the
// documents inside it included, not one per value (docs/reliability.md: a 7.4 KB
// MachineRegistration ran for over 120 s at 3.9 GB). One alias (1024
// nodes) under the budget renders; just over, and the
// amplification shape, exit 78 naming the file and the budget.
func TestRenderInputsHeldToOneYAMLBudget(t *testing.T) {
	under := (protocol.MaxReplyNodes - 1000 - testutil.AliasBulkNodes(0)) / 1024
	over := under + 2
	if testutil.AliasBulkNodes(under)+1000 > protocol.MaxReplyNodes || testutil.AliasBulkNodes(over) <= protocol.MaxReplyNodes {
		t.Fatalf("%d and %d aliases do not straddle the budget of %d nodes", under, over, protocol.MaxReplyNodes)
	}
	mr := func(metadata, config string) string {
		return "apiVersion: elemental.cattle.io/v1beta1\nkind: MachineRegistration\nmetadata:\n  name: fleet\n  namespace: fleet-default\n" + metadata +
			"spec:\n  config:\n    network:\n      configurator: nmstate\n      ipAddresses:\n        ip:\n          apiGroup: ipam.cluster.x-k8s.io\n          kind: InClusterIPPool\n          name: pool\n" +
			"      config:\n" + config
	}
	const iface = "        interfaces:\n        - name: eth0\n          type: ethernet\n          state: up\n"
	// The amplification's shape: the anchors under metadata, each key of the
	// template a value that uses them once.
	amplified := mr(testutil.AmplifyAnchors("  ", "x-anchors"), iface+testutil.AmplifyValues("        ", 180))
	if len(amplified) > 8<<10 {
		t.Fatalf("the amplified MachineRegistration is %d bytes, want a few KB", len(amplified))
	}

	dropIn := "elemental:\n  registration:\n    bootstrap-network:\n      configurator: nmconnections\n      config:\n        eth0: |\n          [connection]\n          id=eth0\n          type=ethernet\n          interface-name=eth0\n          [ipv4]\n          method=manual\n          address1={ip}/24\n      ipAddresses:\n        ip:\n          static:\n          - mac: 52:54:00:00:00:01\n            address: 10.0.0.5\n"
	cloud := func(outer, inner string) string {
		var b strings.Builder
		b.WriteString(outer + "stages:\n  initramfs:\n  - name: boot\n    files:\n    - path: /run/nodereg/config.d/50-bootstrap.yaml\n      content: |\n")
		for _, l := range strings.Split(strings.TrimSuffix(dropIn+inner, "\n"), "\n") {
			b.WriteString("        " + l + "\n")
		}
		return b.String()
	}

	dir := t.TempDir()
	for _, c := range []struct {
		name, doc string
		bootstrap bool
		refused   bool
	}{
		{"MachineRegistration, under", mr(testutil.AliasBulk("  ", "x-bulk", under), iface), false, false},
		{"MachineRegistration, over", mr(testutil.AliasBulk("  ", "x-bulk", over), iface), false, true},
		{"MachineRegistration, amplified", amplified, false, true},
		{"cloud-config, under", cloud(testutil.AliasBulk("", "x-bulk", under), ""), true, false},
		{"cloud-config, over", cloud(testutil.AliasBulk("", "x-bulk", over), ""), true, true},
		// The drop-in inside counts against the same budget as the
		// cloud-config holding it.
		{"the drop-in inside, over", cloud(testutil.AliasBulk("", "x-bulk", under/2+1), testutil.AliasBulk("  ", "x-bulk", under/2+1)), true, true},
		{"the drop-in inside, amplified", cloud("", testutil.AmplifyAnchors("  ", "x-anchors")+"  x-values:\n"+testutil.AmplifyValues("    ", 230)), true, true},
	} {
		p := filepath.Join(dir, strings.NewReplacer(" ", "", ",", "-").Replace(c.name)+".yaml")
		if err := os.WriteFile(p, []byte(c.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"render", "-f", p, "--set", "ip=192.168.122.150"}
		if c.bootstrap {
			args = []string{"render", "--bootstrap", "-f", p, "--set", "mac=52:54:00:00:00:01"}
		}
		code, out, stderr := run(args...)
		switch {
		case !c.refused && code != 0:
			t.Errorf("%s: exit %d, want 0 (under the budget):\n%s%s", c.name, code, out, stderr)
		case c.refused && (code != 78 || !strings.Contains(stderr, p) || !strings.Contains(stderr, protocol.ErrYAMLTooLarge.Error())):
			t.Errorf("%s: exit %d, want 78 naming %s and %q:\n%s", c.name, code, p, protocol.ErrYAMLTooLarge, stderr)
		}
	}
}
