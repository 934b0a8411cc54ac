//go:build bootsim

package boot

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// The cloud-config docs/rancher.md gives for the Rancher flow, whose
// drop-in carries the bootstrap network the operator's generated config
// cannot (docs/config.md, "Drop-ins").
const (
	rancherDoc     = "docs/rancher.md"
	dropInHeading  = "### 4. The first boot without DHCP"
	dropInPath     = "run/nodereg/config.d/50-bootstrap.yaml"
	operatorCCPath = "oem/elemental-cloud-init.yaml"
)

// docCloudConfig is the first ```yaml block under dropInHeading in
// docs/rancher.md, with the lab's interface and subnet in place of the
// doc's.
func docCloudConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), rancherDoc))
	must(t, err)
	var block strings.Builder
	under, in := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, dropInHeading):
			under = true
		case under && !in && l == "```yaml":
			in = true
		case in && l == "```":
			return strings.NewReplacer("eth0", nodeIf, "192.168.122.", "10.231.0.").Replace(block.String())
		case in:
			block.WriteString(l + "\n")
		}
	}
	t.Fatalf("%s: no yaml block under %q", rancherDoc, dropInHeading)
	return ""
}

// TestBootstrapFromCloudConfigDropIn: the node's config is the operator's
// (url and auth, no bootstrap key), its NIC has no address, and the
// MachineRegistration's cloud-config sits under /oem where the operator's
// hook puts it. The boot's initramfs stage (the real yip engine) writes the
// drop-in; the agent brings the bootstrap network up from it, registers,
// applies its pool address and drops the bootstrap profile; the reboot
// needs no bootstrap.
func TestBootstrapFromCloudConfigDropIn(t *testing.T) {
	r, m := keyfileNode(t, "B5 no DHCP: bootstrap from a cloud-config's drop-in")
	m.writeConfig("auth: mac")
	if cfg := string(m.read("oem/registration/config.yaml")); strings.Contains(cfg, "bootstrap") {
		t.Fatalf("the operator's config carries a bootstrap key:\n%s", cfg)
	}
	must(t, os.WriteFile(m.path(operatorCCPath), []byte(docCloudConfig(t)), 0o600))

	env := append(m.withoutNmstatectl(), fastProbe)
	boot, pool := dhcpLessFirstBoot(t, m, r, env)
	if !m.exists(dropInPath) {
		t.Fatalf("the initramfs stage wrote no %s", dropInPath)
	}
	a, err := netip.ParseAddr(boot)
	if err != nil || a.Less(netip.MustParseAddr("10.231.0.50")) || netip.MustParseAddr("10.231.0.59").Less(a) {
		t.Errorf("bootstrap address %q, want one of the drop-in's range 10.231.0.50-59", boot)
	}
	if fi, err := os.Stat(m.path(dropInPath)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("drop-in mode: %v %v, want 0600", fi, err)
	}
	if cfg := string(m.read("oem/registration/config.yaml")); strings.Contains(cfg, "bootstrap") {
		t.Errorf("the drop-in's key went into the config file under /oem:\n%s", cfg)
	}
	if boot == pool {
		t.Errorf("pool address %s is the bootstrap address", pool)
	}
	rebootWithoutBootstrap(t, m, r, pool)
}
