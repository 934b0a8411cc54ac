package doccheck_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// The Rancher flow's commands, as docs/rancher.md, the README's quick
// start and examples/README.md write them.
const (
	rancherRender     = "bin/nodereg-agent render -f examples/rancher/machineregistration.yaml --set inventory-ip=192.168.122.150/24"
	rancherSeedBoot   = "bin/nodereg-agent render --bootstrap -f examples/rancher/seedimage.yaml --set mac=52:54:00:12:34:56"
	rancherMRBoot     = "bin/nodereg-agent render --bootstrap -f examples/rancher/machineregistration.yaml --set mac=52:54:00:12:34:56"
	rancherCloudBoot  = "bin/nodereg-agent render --bootstrap -f examples/rancher/cloud-config.yaml --set uuid=4c4c4544-0042-3610-8052-b4c04f385631"
	staticBootExample = "bin/nodereg-agent render --bootstrap -f examples/node/bootstrap-static.yaml --set mac=52:54:00:12:34:56"
)

func init() {
	for _, l := range []string{rancherRender, rancherSeedBoot, rancherMRBoot} {
		runHere[l] = true
	}
}

// yamlBlockAfter is the first ```yaml block after the first line of file
// that starts with heading and, after it, the first that contains marker.
func yamlBlockAfter(t *testing.T, file, heading, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), file))
	node.Must(t, err)
	var out strings.Builder
	under, marked, in := false, marker == "", false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		switch l := sc.Text(); {
		case !under && strings.HasPrefix(l, heading):
			under = true
		case under && !marked && strings.Contains(l, marker):
			marked = true
		case under && marked && !in && l == "```yaml":
			in = true
		case in && l == "```":
			return out.String()
		case in:
			out.WriteString(l + "\n")
		}
	}
	t.Fatalf("%s: no yaml block under %q after %q", file, heading, marker)
	return ""
}

// agentLine runs a doc's bin/nodereg-agent line with the built agent.
func agentLine(t *testing.T, line string) (string, string, int) {
	t.Helper()
	env := "PATH=" + bins(t) + ":" + os.Getenv("PATH")
	return sh(t, strings.Replace(line, "bin/nodereg-agent", "nodereg-agent", 1), env)
}

// mustPrint fails unless out holds every want.
func mustPrint(t *testing.T, line, out, errs string, code int, want ...string) {
	t.Helper()
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s prints no %q:\n%s", line, w, out)
		}
	}
}

// TestRancherExamples: each object of docs/rancher.md is its file of
// examples/rancher/, byte for byte, and the page's commands, run as
// written on those files, print what the page says: the keyfile with the
// --set address, and the bootstrap network the SeedImage's and the
// MachineRegistration's cloud-config give the machine --set describes.
func TestRancherExamples(t *testing.T) {
	for _, c := range []struct{ file, heading, marker string }{
		{"examples/rancher/inclusterippool.yaml", "### 1. An IP pool", ""},
		{"examples/rancher/machineregistration.yaml", "### 2. A MachineRegistration", ""},
		{"examples/rancher/cloud-config.yaml", "### 4. The first boot without DHCP", ""},
		{"examples/rancher/seedimage.yaml", "### 4. The first boot without DHCP", "Put it in two places"},
	} {
		b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), c.file))
		node.Must(t, err)
		if block := yamlBlockAfter(t, "docs/rancher.md", c.heading, c.marker); block != string(b) {
			t.Errorf("docs/rancher.md's block under %q is not %s:\n%s", c.heading, c.file, block)
		}
	}

	line := doc(t, "docs/rancher.md", rancherRender)
	o, e, code := agentLine(t, line)
	mustPrint(t, line, o, e, code,
		"# {inventory-ip} from pool InClusterIPPool pool-a: 192.168.122.150, --set\n",
		"# ---- keyfile: /etc/NetworkManager/system-connections/eth0.nmconnection",
		doc(t, "docs/rancher.md", "address0=192.168.122.150/24")+"\n",
		doc(t, "docs/rancher.md", "route0=0.0.0.0/0,192.168.122.1"),
		"dns=192.168.122.1\n")
	if strings.Contains(o, "192.0.2.") {
		t.Errorf("a sample address where --set gave one:\n%s", o)
	}

	first := doc(t, "docs/rancher.md", "{boot-ip}: first try 192.168.122.53 from range\n192.168.122.50-192.168.122.59, probed on eth0 before use")
	first = strings.ReplaceAll(first, "\n", " ")
	for _, c := range []struct{ line, where string }{
		{rancherSeedBoot, doc(t, "docs/rancher.md", "SeedImage\nfleet-default/fleet-a-iso spec.cloud-config, stage initramfs \"nodereg\nbootstrap network\", file /run/nodereg/config.d/50-bootstrap.yaml")},
		{rancherMRBoot, "MachineRegistration fleet-default/fleet-a spec.config.cloud-config, stage initramfs \"nodereg bootstrap network\", file /run/nodereg/config.d/50-bootstrap.yaml"},
	} {
		line := doc(t, "docs/rancher.md", c.line)
		o, e, code := agentLine(t, line)
		mustPrint(t, line, o, e, code,
			strings.ReplaceAll(c.where, "\n", " "),
			"# machine: mac=52:54:00:12:34:56 serial=\"\" uuid=\"\" (--set)\n",
			"  "+first+"\n",
			"# ---- bootstrap keyfile: /run/NetworkManager/system-connections/nodereg-bootstrap-eth0.nmconnection (0600, gone at reboot)",
			doc(t, "docs/rancher.md", "address0=192.168.122.53/24")+"\n")
	}
}

// examples/README.md's bootstrap previews: the cloud-config alone (a range,
// started from the UUID) and the static node config (the MAC's entry).
func TestExamplesBootstrapPreviews(t *testing.T) {
	line := doc(t, "examples/README.md", rancherCloudBoot)
	o, e, code := agentLine(t, line)
	mustPrint(t, line, o, e, code, "cloud-config, stage initramfs", "from range 192.168.122.50-192.168.122.59")
	line = doc(t, "examples/README.md", staticBootExample)
	o, e, code = agentLine(t, line)
	mustPrint(t, line, o, e, code, "config file or drop-in", "{boot-ip}: first try 10.231.0.21 from static[0] (mac 52:54:00:12:34:56)")
}
