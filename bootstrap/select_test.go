package bootstrap

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
)

func previewAddr(t *testing.T, c *Config, f Facts) (string, error) {
	t.Helper()
	p, err := Preview(c, f)
	if err != nil {
		return "", err
	}
	return p.Network.IPAddresses["boot-ip"], nil
}

func TestStaticSelection(t *testing.T) {
	c := mustConfig(t, staticFile)
	cases := []struct {
		name  string
		facts Facts
		want  string
	}{
		{"by MAC among several NICs", Facts{MACs: []string{"52:54:00:00:00:01", "52:54:00:31:00:02"}, Serial: "other", UUID: "other"}, "10.231.0.21"},
		{"by serial", Facts{MACs: []string{"52:54:00:00:00:01"}, Serial: "CZ2041XJ7R"}, "10.231.0.22"},
		{"by UUID, firmware spelling in lower case", Facts{UUID: "4c4c4544-0042-3610-8052-b4c04f385631"}, "10.231.0.23"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := previewAddr(t, c, tc.facts)
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestStaticSelectionMACSpellings(t *testing.T) {
	c := mustConfig(t, replace(t, staticFile, "mac: 52:54:00:31:00:02", "mac: 52-54-00-31-00-0A"))
	if got, err := previewAddr(t, c, Facts{MACs: []string{"52:54:00:31:00:0a"}}); err != nil || got != "10.231.0.21" {
		t.Fatalf("upper-case dashed MAC in config: got %q, %v", got, err)
	}
}

func TestStaticNoMatchNamesWhatWasLookedFor(t *testing.T) {
	c := mustConfig(t, staticFile)
	f := Facts{MACs: []string{"52:54:00:99:00:01", "52:54:00:99:00:02"}, Serial: "XYZ", UUID: "11111111-2222-3333-4444-555555555555"}
	_, err := Preview(c, f)
	var nm *NoMatchError
	if !errors.As(err, &nm) {
		t.Fatalf("got %v, want *NoMatchError", err)
	}
	for _, want := range []string{Key + ".ipAddresses.boot-ip", "3 static entries", "52:54:00:99:00:01,52:54:00:99:00:02", `serial="XYZ"`, `uuid="11111111-2222-3333-4444-555555555555"`, "no range"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestStaticAmbiguousMatchIsRefused(t *testing.T) {
	c := mustConfig(t, staticFile)
	f := Facts{MACs: []string{"52:54:00:31:00:02"}, UUID: "4c4c4544-0042-3610-8052-b4c04f385631"}
	_, err := Preview(c, f)
	var ae *AmbiguousError
	if !errors.As(err, &ae) || ae.First != 0 || ae.Second != 2 {
		t.Fatalf("MAC and UUID entries with different addresses: %v", err)
	}
	// Two ways of naming the machine that agree are fine.
	c = mustConfig(t, replace(t, staticFile, "address: 10.231.0.23", "address: 10.231.0.21"))
	if got, err := previewAddr(t, c, f); err != nil || got != "10.231.0.21" {
		t.Fatalf("agreeing entries: got %q, %v", got, err)
	}
}

func TestStaticFallsBackToRange(t *testing.T) {
	file := replace(t, staticFile, "        boot-ip:\n", "        boot-ip:\n          range: {start: 10.231.0.200, end: 10.231.0.200, prefix: 24}\n")
	c := mustConfig(t, file)
	if got, err := previewAddr(t, c, Facts{MACs: []string{"52:54:00:31:00:02"}}); err != nil || got != "10.231.0.21" {
		t.Errorf("matched machine: got %q, %v", got, err)
	}
	p, err := Preview(c, Facts{MACs: []string{"52:54:00:99:99:99"}})
	if err != nil || p.Network.IPAddresses["boot-ip"] != "10.231.0.200" || p.Choices[0].Source != "range 10.231.0.200-10.231.0.200" {
		t.Fatalf("unmatched machine: %+v, %v", p, err)
	}
}

// The resolved config is an ordinary network config: apply.Render turns it
// into the keyfile the admin wrote, with the address in place.
func TestPreviewRendersWithApply(t *testing.T) {
	c := mustConfig(t, staticFile)
	p, err := Preview(c, Facts{Serial: "CZ2041XJ7R"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := apply.Render(p.Network)
	if err != nil {
		t.Fatal(err)
	}
	want := "[connection]\nid=bootstrap-eth0\ntype=ethernet\ninterface-name=eth0\nautoconnect=false\n[ipv4]\nmethod=manual\naddress1=10.231.0.22/24,10.231.0.1\ndns=10.231.0.1;\ndad-timeout=3000\n[ipv6]\nmethod=disabled\n"
	if len(r.Keyfiles) != 1 || r.Keyfiles[0].Name != "bootstrap-eth0.nmconnection" || string(r.Keyfiles[0].Content) != want {
		t.Fatalf("rendered %+v", r.Keyfiles)
	}
	ch := p.Choices[0]
	if ch.FirstTry.String() != "10.231.0.22" || ch.Probed || ch.Interface != "eth0" || ch.Source != "static[1] (serial CZ2041XJ7R)" {
		t.Errorf("choice %+v", ch)
	}
	if got := p.Keyfiles.Path(host.Root("/tmp/root"), r.Keyfiles[0].Name); got != "/tmp/root/run/NetworkManager/system-connections/nodereg-bootstrap-bootstrap-eth0.nmconnection" {
		t.Errorf("keyfile path %s", got)
	}
}

func TestOwnedKeyfiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run/NetworkManager/system-connections")
	if got, err := RuntimeKeyfiles.Owned(host.Root(root)); err != nil || got != nil {
		t.Fatalf("no directory: %v, %v", got, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "nodereg-bootstrap-dir.nmconnection"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nodereg-bootstrap-eth0.nmconnection", "eth0.nmconnection", "nodereg-bootstrap-eth0.nmconnection.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := RuntimeKeyfiles.Owned(host.Root(root))
	if err != nil || len(got) != 1 || got[0] != filepath.Join(dir, "nodereg-bootstrap-eth0.nmconnection") {
		t.Fatalf("owned: %v, %v", got, err)
	}
}

// sysfs writes a scratch root's /sys the way the kernel lays it out.
func sysfs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadFactsFromSysfs(t *testing.T) {
	root := sysfs(t, map[string]string{
		"sys/class/net/eth1/address":          "52:54:00:AA:00:02",
		"sys/class/net/eth1/addr_assign_type": "0",
		"sys/class/net/eth0/address":          "52:54:00:aa:00:01",
		"sys/class/net/eth0/addr_assign_type": "0",
		// A random address (1) identifies nothing.
		"sys/class/net/eth2/address":               "0a:11:22:33:44:55",
		"sys/class/net/eth2/addr_assign_type":      "1",
		"sys/class/net/lo/address":                 "00:00:00:00:00:00",
		"sys/class/net/lo/addr_assign_type":        "0",
		"sys/class/dmi/id/product_serial":          "CZ2041XJ7R",
		"sys/class/dmi/id/product_uuid":            "4C4C4544-0042-3610-8052-B4C04F385631",
		"devices/virtual/net/br0/address":          "52:54:00:bb:00:01",
		"devices/virtual/net/br0/addr_assign_type": "0",
	})
	// A bridge: a symlink into devices/virtual, as in the real sysfs.
	if err := os.Symlink("../../../devices/virtual/net/br0", filepath.Join(root, "sys/class/net/br0")); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFacts(host.Root(root))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.MACs, ",") != "52:54:00:aa:00:01,52:54:00:aa:00:02" || f.Serial != "CZ2041XJ7R" || f.UUID != "4c4c4544-0042-3610-8052-b4c04f385631" {
		t.Fatalf("facts %s", f)
	}
	if id, _ := f.Identity(); id != "uuid:4c4c4544-0042-3610-8052-b4c04f385631" {
		t.Errorf("identity %q", id)
	}
}

func TestReadFactsDropsFirmwarePlaceholders(t *testing.T) {
	root := sysfs(t, map[string]string{
		"sys/class/dmi/id/product_serial": "To Be Filled By O.E.M.",
		"sys/class/dmi/id/product_uuid":   "03000200-0400-0500-0006-000700080009",
	})
	f, err := ReadFacts(host.Root(root))
	if err != nil || f.Serial != "" || f.UUID != "" || len(f.MACs) != 0 {
		t.Fatalf("facts %s, %v", f, err)
	}
	if _, err := f.Identity(); err == nil {
		t.Error("a machine with no usable identity got one")
	}
}

func TestIdentityFallsBack(t *testing.T) {
	if id, _ := (Facts{MACs: []string{"52:54:00:00:00:09", "52:54:00:00:00:03"}, Serial: "S"}).Identity(); id != "mac:52:54:00:00:00:03" {
		t.Errorf("without UUID: %q, want the smallest MAC", id)
	}
	if id, _ := (Facts{Serial: "S"}).Identity(); id != "serial:S" {
		t.Errorf("serial only: %q", id)
	}
}

func TestPlanPrint(t *testing.T) {
	p, err := Preview(mustConfig(t, staticFile), Facts{UUID: "4c4c4544-0042-3610-8052-b4c04f385631"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.Print(&b); err != nil {
		t.Fatal(err)
	}
	want := "bootstrap network (elemental.registration.bootstrap-network, configurator nmconnections)\n" +
		"  {boot-ip}: first try 10.231.0.23 from static[2] (uuid 4c4c4544-0042-3610-8052-b4c04f385631), probed on eth0 before use\n" +
		"  keyfiles: /run/NetworkManager/system-connections/nodereg-bootstrap-<name>.nmconnection, mode 0600, gone at reboot\n"
	if b.String() != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The static example's keyfile, rendered with the chosen address, passes
// NetworkManager's own parser (dad-timeout included), so the example in
// docs/bootstrap.md is one an admin can copy.
func TestStaticExampleKeyfilePassesNmcliOffline(t *testing.T) {
	if _, err := exec.LookPath("nmcli"); err != nil {
		t.Skip("nmcli not installed (apt package network-manager)")
	}
	if err := exec.Command("nmcli", "--offline", "--version").Run(); err != nil {
		t.Skip("this nmcli has no --offline mode")
	}
	p, err := Preview(mustConfig(t, staticFile), Facts{MACs: []string{"52:54:00:31:00:02"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := apply.Render(p.Network)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("nmcli", "--offline", "connection", "modify", "connection.id", "bootstrap-eth0")
	c.Stdin = bytes.NewReader(r.Keyfiles[0].Content)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("nmcli --offline rejects the example: %v\n%s", err, out)
	}
	for _, want := range []string{"address1=10.231.0.21/24,10.231.0.1", "dad-timeout=3000"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("normalised keyfile lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteAndRemoveKeyfiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run/NetworkManager/system-connections")
	// A profile of the image or of NetworkManager itself: never touched.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Wired connection 1.nmconnection"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	kfs := []apply.Keyfile{{Name: "bootstrap-eth0.nmconnection", Content: []byte("[connection]\nid=a\n")}, {Name: "bootstrap-eth1.nmconnection", Content: []byte("[connection]\nid=b\n")}}
	paths, err := RuntimeKeyfiles.Write(host.Root(root), kfs)
	if err != nil || len(paths) != 2 {
		t.Fatalf("write: %v %v", paths, err)
	}
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
		if b, _ := os.ReadFile(p); string(b) != string(kfs[i].Content) {
			t.Errorf("%s holds %q", p, b)
		}
	}
	removed, err := RuntimeKeyfiles.Remove(host.Root(root))
	if err != nil || len(removed) != 2 {
		t.Fatalf("remove: %v %v", removed, err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 1 || left[0].Name() != "Wired connection 1.nmconnection" {
		t.Fatalf("left in %s: %v", dir, left)
	}
}

func TestWriteRefusesEscapingNameAndLeavesNothing(t *testing.T) {
	root := t.TempDir()
	kfs := []apply.Keyfile{{Name: "ok.nmconnection", Content: []byte("a")}, {Name: "../../etc/x.nmconnection", Content: []byte("b")}}
	if paths, err := RuntimeKeyfiles.Write(host.Root(root), kfs); err == nil || paths != nil {
		t.Fatalf("write with an escaping name: %v %v", paths, err)
	}
	if owned, _ := RuntimeKeyfiles.Owned(host.Root(root)); len(owned) != 0 {
		t.Fatalf("half-written bootstrap left behind: %v", owned)
	}
}
