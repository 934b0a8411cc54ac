package e2e

import (
	"encoding/json"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// fixtureMachine is a machine whose root is the inventory fixture of a q35
// VM (agent/inventory/testdata/vm1): real-looking /sys, /proc, os-release.
func fixtureMachine(t *testing.T, url string) *machine {
	t.Helper()
	root := filepath.Join(t.TempDir(), "vm1")
	src := filepath.Join(testbin.ModuleRoot(), "agent/inventory/testdata/vm1")
	if out, err := exec.Command("cp", "-a", src, root).CombinedOutput(); err != nil {
		t.Fatalf("copying the fixture: %v\n%s", err, out)
	}
	m := &machine{t: t, Machine: &node.Machine{Root: root, MAC: "52:54:00:12:34:56", StubDir: t.TempDir()}}
	m.WriteConfig("elemental:\n  registration:\n    url: " + url + "\n    auth: mac\n    labels: {rack: r12}\n")
	return m
}

// What regserver stores is what the agent sent: SMBIOS fields, labels,
// annotations; the registration names the machine from SMBIOS.
func TestServerStoresTheInventoryTheAgentSent(t *testing.T) {
	cfg := strings.Replace(serverConfig("192.168.122.150-192.168.122.200", nmstateTemplate),
		"  machineName: m-${System Information/UUID}\n",
		"  machineName: m-${System Information/UUID}\n  machineInventoryLabels:\n    vendor: ${System Information/Manufacturer}\n", 1)
	rs := startRegServer(t, cfg, 0)
	m := fixtureMachine(t, rs.url())
	labelsFile := filepath.Join(m.Root, "etc/elemental/labels.yaml")
	testutil.Must(t, os.MkdirAll(filepath.Dir(labelsFile), 0o755))
	testutil.Must(t, os.WriteFile(labelsFile, []byte("role: worker\n"), 0o644))
	if _, err := m.run(nil); err != nil {
		t.Fatal(err)
	}
	var list []struct{ Name string }
	getJSON(t, rs.http.URL+"/admin/inventories", &list)
	if len(list) != 1 {
		t.Fatalf("inventories %+v", list)
	}
	// The fixture's product_uuid, lower-cased by the name sanitiser.
	if want := "m-4c4c4544-0042-3010-8058-b4c04f4e4e32"; list[0].Name != want {
		t.Errorf("machine name %q, want %q", list[0].Name, want)
	}
	var inv struct {
		Labels      map[string]string
		Annotations map[string]string
		SMBIOS      map[string]map[string]any
		SystemData  map[string]any
	}
	getJSON(t, rs.http.URL+"/admin/inventories/"+list[0].Name, &inv)
	if got := inv.SMBIOS["System Information"]["Manufacturer"]; got != "QEMU" {
		t.Errorf("stored SMBIOS System Information/Manufacturer = %v", got)
	}
	if got := inv.SMBIOS["BIOS Information"]["Vendor"]; got != "SeaBIOS" {
		t.Errorf("stored SMBIOS BIOS Information/Vendor = %v", got)
	}
	for k, want := range map[string]string{
		"elemental.cattle.io/rack": "r12", "elemental.cattle.io/role": "worker", "vendor": "QEMU",
	} {
		if inv.Labels[k] != want {
			t.Errorf("label %s = %q, want %q (labels %v)", k, inv.Labels[k], want, inv.Labels)
		}
	}
	for k, want := range map[string]string{
		"elemental.cattle.io/auth": "mac", "elemental.cattle.io/registration-ip": "127.0.0.1",
		"elemental.cattle.io/reg-version": "test", "elemental.cattle.io/os.id": "opensuse-leap-micro",
	} {
		if inv.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, inv.Annotations[k], want)
		}
	}
	if inv.SystemData["System Data"] == nil || inv.SystemData["CPU"] == nil {
		t.Errorf("stored system data lacks families: %v", slices.Sorted(maps.Keys(inv.SystemData)))
	}
}

// `agent inventory` prints SMBIOS, labels and annotations as JSON, with no
// secret from the config.
func TestInventoryCommandPrintsJSONWithoutSecrets(t *testing.T) {
	m := fixtureMachine(t, "http://127.0.0.1:1/elemental/registration/x")
	m.WriteConfig("elemental:\n  registration:\n    url: http://127.0.0.1:1/elemental/registration/x\n    auth: mac\n    labels: {rack: r12}\n  system-agent:\n    token: SECRET-TOKEN-42\n")
	out, err := exec.Command(testbin.Build(t, "./cmd/agent"), "inventory", "--root", m.Root).Output()
	if err != nil {
		t.Fatalf("agent inventory: %v", err)
	}
	var doc map[string]json.RawMessage
	testutil.Must(t, json.Unmarshal(out, &doc))
	for _, k := range []string{"smbios", "labels", "annotations"} {
		if len(doc[k]) < 3 {
			t.Errorf("dump lacks %q: %s", k, out)
		}
	}
	if !strings.Contains(string(doc["labels"]), `"rack": "r12"`) {
		t.Errorf("labels: %s", doc["labels"])
	}
	if strings.Contains(string(out), "SECRET-TOKEN-42") {
		t.Error("inventory dump leaks the system-agent token")
	}
}
