package netpolicy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/keyfile"
)

func symlink(t *testing.T, root, target, p string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
		t.Fatal(err)
	}
}

// Profiles reached through symlinks are loaded as NetworkManager loads
// them: the target below the node's root, the entry's name for the id.
func TestForeignFollowsSymlinks(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("profiles must be owned by root, as NetworkManager requires")
	}
	root := t.TempDir()
	const etc = "etc/NetworkManager/system-connections"
	writeProfile(t, root, "usr/share/image/nic.nmconnection", "[connection]\nuuid=AAAAAAAA-0C3B-4E5F-9A7D-1B2C3D4E5F60\ntype=ethernet\n", 0o600)
	writeProfile(t, root, "usr/share/image/open.nmconnection", "[connection]\nid=open\ntype=ethernet\n", 0o644)
	if err := os.MkdirAll(filepath.Join(root, etc), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, root, "/usr/share/image/nic.nmconnection", etc+"/abs.nmconnection")
	symlink(t, root, "../../../usr/share/image/nic.nmconnection", etc+"/rel.nmconnection")
	symlink(t, root, "abs.nmconnection", etc+"/chain.nmconnection")
	symlink(t, root, "/usr/share/image/open.nmconnection", etc+"/open.nmconnection")
	symlink(t, root, "/nowhere", etc+"/dangling.nmconnection")
	symlink(t, root, "loop.nmconnection", etc+"/loop.nmconnection")
	got, err := Policy{}.Foreign(host.Root(root), func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"abs": "/" + etc + "/abs.nmconnection", "rel": "/" + etc + "/rel.nmconnection", "chain": "/" + etc + "/chain.nmconnection"}
	if len(got) != len(want) {
		t.Fatalf("profiles %+v, want %v (the open, dangling and looping links skipped)", got, want)
	}
	for _, p := range got {
		if want[p.ID] != p.Path || p.UUID != "aaaaaaaa-0c3b-4e5f-9a7d-1b2c3d4e5f60" {
			t.Errorf("profile %+v: want path %s and the target's uuid, lower-cased", p, want[p.ID])
		}
	}
}

// The values NetworkManager 1.42.4 showed (nmcli -f NAME,UUID,FILENAME
// connection show) for profiles without uuid=, its keyfile path the
// default /etc/NetworkManager/system-connections: one there, one under
// /usr/lib (the UUID still derives from the /etc path), one a symlink
// under /etc to a file elsewhere; and a legacy 40-digit uuid= it
// normalised.
const (
	goldenImageEth0 = "b2300c3b-8583-3bff-8df9-d984028204f2" // /etc/.../image-eth0.nmconnection
	goldenLibEth1   = "ec7c7f7d-ddf1-3651-aa5d-f12114e4f9a2" // /usr/lib/.../lib-eth1.nmconnection
	goldenNoID      = "577decff-3247-376a-8fce-31cecdfe0706" // /etc/.../noid.nmconnection, a symlink
	goldenLegacy    = "91f80080-8380-5609-8fec-c7ad3f7f0840" // uuid=ABAB...AB (40 digits)
)

func TestKeyfileUUIDIsNetworkManagers(t *testing.T) {
	for name, want := range map[string]string{"image-eth0.nmconnection": goldenImageEth0,
		"lib-eth1.nmconnection": goldenLibEth1, "noid.nmconnection": goldenNoID} {
		if got := keyfile.DerivedUUID(name); got != want {
			t.Errorf("keyfile.DerivedUUID(%s) = %s, want %s", name, got, want)
		}
	}
	if got := keyfile.NormalUUID(strings.Repeat("AB", 20)); got != goldenLegacy {
		t.Errorf("legacy uuid normalised to %s, want %s", got, goldenLegacy)
	}
}

// A server keyfile claiming the UUID that NetworkManager derives for an
// image profile without uuid=, in any case, is refused by the unique rule.
func TestCheckForeignDerivedAndCaseInsensitiveUUIDs(t *testing.T) {
	foreign := []Profile{{Path: "/usr/lib/NetworkManager/system-connections/image-eth0.nmconnection", ID: "image-eth0", UUID: keyfile.DerivedUUID("image-eth0.nmconnection")}}
	kf := Keyfile{Label: "config.eth0", Name: "eth0.nmconnection",
		Content: []byte("[connection]\nid=eth0\nuuid=" + strings.ToUpper(goldenImageEth0) + "\ntype=ethernet\n")}
	err := CheckForeign([]Keyfile{kf}, foreign)
	if r, ok := err.(*Refusal); !ok || r.Rule != Unique || !strings.Contains(r.Path, "uuid") {
		t.Fatalf("CheckForeign: %v, want a refusal by the unique rule", err)
	}
	// Ours without uuid= gets its own derived UUID: no clash with another name.
	kf.Content = []byte("[connection]\nid=eth0\ntype=ethernet\n")
	if err := CheckForeign([]Keyfile{kf}, foreign); err != nil {
		t.Errorf("a profile of another name refused: %v", err)
	}
}

func TestNormalUUID(t *testing.T) {
	if got := keyfile.NormalUUID("8D2F6A41-0C3B-4E5F-9A7D-1B2C3D4E5F60"); got != "8d2f6a41-0c3b-4e5f-9a7d-1b2c3d4e5f60" {
		t.Errorf("upper case: %s", got)
	}
	if got := keyfile.NormalUUID(strings.Repeat("ab", 20)); got != goldenLegacy {
		t.Errorf("a legacy value in lower case: %s, want %s as for upper case", got, goldenLegacy)
	}
}
