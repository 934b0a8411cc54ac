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

// rancherRender is docs/rancher.md's render line, run as written.
const rancherRender = "bin/agent render -f examples/rancher/machineregistration.yaml --set inventory-ip=192.168.122.150/24"

func init() { runHere[rancherRender] = true }

// yamlBlockUnder is the first ```yaml block after the line starting with
// heading in file.
func yamlBlockUnder(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), file))
	node.Must(t, err)
	var out strings.Builder
	under, in := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.HasPrefix(l, heading):
			under = true
		case under && !in && l == "```yaml":
			in = true
		case in && l == "```":
			return out.String()
		case in:
			out.WriteString(l + "\n")
		}
	}
	t.Fatalf("%s: no yaml block under %q", file, heading)
	return ""
}

// TestRancherRenderExample: docs/rancher.md's MachineRegistration is
// examples/rancher/machineregistration.yaml, and the doc's render line on
// it prints the keyfile with the --set address, the template's prefix and
// route, and says where the address came from.
func TestRancherRenderExample(t *testing.T) {
	const file = "examples/rancher/machineregistration.yaml"
	block := yamlBlockUnder(t, "docs/rancher.md", "### 2. A MachineRegistration")
	b, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(), file))
	node.Must(t, err)
	if block != string(b) {
		t.Errorf("docs/rancher.md's MachineRegistration is not %s:\n%s", file, block)
	}
	line := doc(t, "docs/rancher.md", rancherRender)
	env := "PATH=" + bins(t) + ":" + os.Getenv("PATH")
	o, e, code := sh(t, strings.Replace(line, "bin/agent", "agent", 1), env)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", line, code, o, e)
	}
	for _, want := range []string{
		"# {inventory-ip} from pool InClusterIPPool pool-a: 192.168.122.150, --set\n",
		"# ---- keyfile: /etc/NetworkManager/system-connections/eth0.nmconnection",
		"address0=192.168.122.150/24\n",
		"route0=0.0.0.0/0,192.168.122.1",
		"dns=192.168.122.1\n",
	} {
		if !strings.Contains(o, want) {
			t.Errorf("%s prints no %q:\n%s", line, want, o)
		}
	}
	if strings.Contains(o, "192.0.2.") {
		t.Errorf("a sample address where --set gave one:\n%s", o)
	}
	for _, said := range []string{"address0=192.168.122.150/24", "route0=0.0.0.0/0,192.168.122.1"} {
		doc(t, "docs/rancher.md", said)
	}
}
