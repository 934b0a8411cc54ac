package inventory

import (
	"encoding/json"
	"errors"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/vectors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestMACAddressFixture(t *testing.T) {
	// eth1's 52:54:00:00:00:02 sorts before eth0's; dummy0 (00:…:01) is
	// virtual, br0's address is not permanent, lo is skipped.
	got, err := MACAddress(host.Root("testdata/vm1"))
	if err != nil {
		t.Fatal(err)
	}
	if got != "52:54:00:00:00:02" {
		t.Errorf("MACAddress = %q", got)
	}
}

func TestMACAddressNoCandidate(t *testing.T) {
	root := t.TempDir()
	dir := host.Root(root).Path("/sys/class/net/eth0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"address": "00:00:00:00:00:00\n", "addr_assign_type": "0\n"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := MACAddress(host.Root(root)); !errors.Is(err, ErrNoIdentifier) {
		t.Errorf("err = %v, want ErrNoIdentifier", err)
	}
	if _, err := MACAddress(host.Root(t.TempDir())); err == nil {
		t.Error("want an error without /sys/class/net")
	}
}

func TestSystemUUID(t *testing.T) {
	got, err := SystemUUID(host.Root("testdata/vm1"))
	if err != nil || got != "4C4C4544-0042-3010-8058-B4C04F4E4E32" {
		t.Errorf("SystemUUID = %q, %v (case must be preserved)", got, err)
	}
	for _, bad := range []string{"", "  \n", "Unspecified", "None", "Not Settable", "Not Present"} {
		root := t.TempDir()
		dir := host.Root(root).Path("/sys/class/dmi/id")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "product_uuid"), []byte(bad+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
		if id, err := SystemUUID(host.Root(root)); !errors.Is(err, ErrNoIdentifier) {
			t.Errorf("%q: got %q, %v; want ErrNoIdentifier", bad, id, err)
		}
	}
	if _, err := SystemUUID(host.Root(t.TempDir())); !errors.Is(err, ErrNoIdentifier) {
		t.Errorf("unreadable UUID: err = %v, want ErrNoIdentifier", err)
	}
}

// The os-release of a Debian 12 system.
const debian12OSRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
`

func TestAnnotationsMatchUpstreamVector(t *testing.T) {
	raw := vectors.Read(t, "upstream-annotations.json")
	root := t.TempDir()
	if err := os.MkdirAll(host.Root(root).Path("/etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host.Root(root).Path("/etc/os-release"), []byte(debian12OSRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	got := Annotations(AnnotationOptions{
		Files: host.Root(root), RegVersion: "0.1.0-dev", Auth: "emulated-tpm",
		RegistrationIP: "127.0.0.1",
	})
	jsonEqual(t, got, string(raw))
}

func TestAnnotationsFixture(t *testing.T) {
	got := Annotations(AnnotationOptions{Files: host.Root("testdata/vm1"), RegVersion: "v1.9.2", Auth: "mac", NoToolkit: true})
	want := map[string]string{
		"reg-version": "v1.9.2", "auth": "mac", "os.unmanaged": "true",
		"os.name": "openSUSE Leap Micro", "os.version": "6.0", "os.id": "opensuse-leap-micro",
		"os.version-id":  "'6.0'", // single quotes are kept, as upstream does
		"os.pretty-name": "openSUSE Leap Micro 6.0", "os.image": "registry.example/os:v6",
		"os.cpe-name": "cpe:/o:opensuse:leap-micro:6.0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	// No os-release: only the other keys.
	got = Annotations(AnnotationOptions{Files: host.Root(t.TempDir()), Auth: "tpm"})
	if !reflect.DeepEqual(got, map[string]string{"auth": "tpm"}) {
		t.Errorf("without os-release: %v", got)
	}
}

func TestLabelsPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "labels.yaml")
	if err := os.WriteFile(file, []byte("site: file\nrack: r1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := host.Root(dir)
	got, err := Labels(files,
		map[string]string{"site": "config", "role": "config", "rack": "config"},
		"/labels.yaml",
		[]string{"role=flag,zone=z1", "owner=ops"},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"site": "file", "rack": "r1", "role": "flag", "zone": "z1", "owner": "ops"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	// A missing labels file is skipped; an unparseable one is an error.
	if got, err := Labels(files, map[string]string{"a": "1"}, "/none.yaml", nil); err != nil || got["a"] != "1" {
		t.Errorf("missing file: %v, %v", got, err)
	}
	if err := os.WriteFile(file, []byte("- not\n- a map\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Labels(files, nil, "/labels.yaml", nil); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("unparseable file: err = %v, want one naming the file", err)
	}
	if _, err := Labels(files, nil, "", []string{"novalue"}); err == nil {
		t.Error("a flag without '=' must be rejected")
	}
}

func TestDumpHasEverythingAndNoSecrets(t *testing.T) {
	inv := &Inventory{
		SMBIOS:       map[string]any{"System Information": map[string]any{"UUID": "u-1"}},
		SystemDataV2: map[string]any{"Runtime": map[string]any{"Hostname": "node-1"}},
		Degraded:     []string{FamilyGPU},
	}
	out, err := Dump(inv, map[string]string{"site": "a"}, map[string]string{"auth": "tpm"})
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, json.RawMessage(out), `{"smbios":{"System Information":{"UUID":"u-1"}},
		"systemData":{"Runtime":{"Hostname":"node-1"}},"labels":{"site":"a"},"annotations":{"auth":"tpm"},
		"degraded":["GPU"]}`)
	empty, err := Dump(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, json.RawMessage(empty), `{"smbios":{},"systemData":{},"labels":{},"annotations":{}}`)
}

// A scratch root without sys/: the mac and sys-uuid identifiers say that
// --root moved /sys, and how to give it back; the same file missing on a
// root that has its own sys/ gets no such sentence.
func TestIdentifiersSayWhatRootMoved(t *testing.T) {
	root := t.TempDir()
	files := host.Root(root)
	for name, f := range map[string]func(host.FS) (string, error){"mac": MACAddress, "sys-uuid": SystemUUID} {
		_, err := f(files)
		if err == nil || !strings.Contains(err.Error(), "--root moves /sys too") || !strings.Contains(err.Error(), "mount --bind /sys "+root+"/sys") {
			t.Errorf("%s under a root with no sys/: %v", name, err)
		}
	}
	if err := os.MkdirAll(root+"/sys/class/net", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := SystemUUID(files); err == nil || strings.Contains(err.Error(), "--root moves") {
		t.Errorf("sys-uuid under a root with its own sys/: %v (the hint is for a root without /sys)", err)
	}
}
