//go:build bootsim

package boot

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// imageUUID is the UUID of the image's own profile for the NIC; the server's
// template below claims it too (docs/reliability.md, "Network-config policy").
const imageUUID = "8d2f6a41-0c3b-4e5f-9a7d-1b2c3d4e5f60"

// uuidClashTemplate is keyfileTemplate with the image profile's UUID.
var uuidClashTemplate = strings.Replace(keyfileTemplate, "        type=ethernet\n", "        uuid="+imageUUID+"\n        type=ethernet\n", 1)

// TestPolicyImageUUIDKept: the image carries a profile of its own for the
// NIC, active with the address the node booted with. The server's profile
// has the same UUID, which would hide the image's profile in
// NetworkManager. The agent refuses it (exit 78, naming both), writes
// nothing, and the image's profile stays loaded and active.
func TestPolicyImageUUIDKept(t *testing.T) {
	t.Parallel()
	r := newReport(t, "policy: a server profile with an image profile's UUID refused")
	if !strings.Contains(uuidClashTemplate, "uuid="+imageUUID) {
		t.Fatal("the template does not carry the image's UUID")
	}
	m := newMachine(t, serverConfig(uuidClashTemplate))
	start := m.boot(active, false)
	image := []byte("[connection]\nid=image-nic\nuuid=" + imageUUID + "\ntype=ethernet\ninterface-name=" + nodeIf +
		"\n\n[ipv4]\nmethod=manual\naddress1=" + cidr(bootstrap) + "\n\n[ipv6]\nmethod=disabled\n")
	imagePath := keyfileDir + "/image-nic.nmconnection"
	must(t, os.WriteFile(m.path(imagePath), image, 0o600))
	must(t, m.nmcli("connection", "reload"))
	must(t, m.nmcli("connection", "up", "uuid", imageUUID))
	r.boot("image profile", m.waitAddr(start, cidr(bootstrap)))

	res := m.runAgent(nil)
	if res.code != 78 {
		t.Fatalf("agent exit %d, want 78 (a server profile that hides the image's)", res.code)
	}
	for _, want := range []string{"uuid " + imageUUID, "/" + imagePath, "rule unique"} {
		if !strings.Contains(res.out, want) {
			t.Errorf("the agent's output does not name %q", want)
		}
	}
	if b, err := os.ReadFile(m.path(imagePath)); err != nil || !bytes.Equal(b, image) {
		t.Errorf("the image's keyfile changed: %v\n%s", err, b)
	}
	for _, p := range []string{keyfileDir + "/" + nodeIf + ".nmconnection", applicator, manifest} {
		if m.exists(p) {
			t.Errorf("a refused config wrote %s", p)
		}
	}
	active, err := m.nmcliOut("-g", "GENERAL.CONNECTION", "device", "show", nodeIf)
	must(t, err)
	if strings.TrimSpace(active) != "image-nic" {
		t.Errorf("%s is connected by %q, want the image's profile image-nic", nodeIf, strings.TrimSpace(active))
	}
	if got := m.profiles(); !slices.Contains(got, "image-nic") || slices.Contains(got, profile) {
		t.Errorf("NetworkManager profiles %v: want image-nic and not %s", got, profile)
	}
	if got := m.addrs(); !equal(got, []string{cidr(bootstrap)}) {
		t.Errorf("%s has %v, want the image's %s only", nodeIf, got, cidr(bootstrap))
	}
}
