//go:build bootsim

package boot

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// symlinkUUID is the UUID of an image profile reached through a symlink.
const symlinkUUID = "6a1e3c55-0d2b-4c7e-8f1a-2b3c4d5e6f70"

// TestPolicySymlinkedImageProfileKept: the image's profile for the NIC is
// a symlink in NetworkManager's keyfile directory to a file elsewhere in
// the image (relative, so it resolves inside the node's root for
// NetworkManager and the agent alike). NetworkManager loads it and it is
// active; the server's profile claims its UUID in upper case. The agent
// refuses it (exit 78, rule unique, naming the link), writes nothing, and
// the image's profile stays active.
func TestPolicySymlinkedImageProfileKept(t *testing.T) {
	t.Parallel()
	r := newReport(t, "policy: a server profile with a symlinked image profile's UUID refused")
	tmpl := strings.Replace(keyfileTemplate, "        type=ethernet\n", "        uuid="+strings.ToUpper(symlinkUUID)+"\n        type=ethernet\n", 1)
	if !strings.Contains(tmpl, strings.ToUpper(symlinkUUID)) {
		t.Fatal("the template does not carry the image's UUID")
	}
	m := newMachine(t, serverConfig(tmpl))
	start := m.boot(active, false)
	image := []byte("[connection]\nid=image-link\nuuid=" + symlinkUUID + "\ntype=ethernet\ninterface-name=" + nodeIf +
		"\n\n[ipv4]\nmethod=manual\naddress1=" + cidr(bootstrap) + "\n\n[ipv6]\nmethod=disabled\n")
	target := "usr/share/image/nic.nmconnection"
	must(t, os.MkdirAll(filepath.Dir(m.path(target)), 0o755))
	must(t, os.WriteFile(m.path(target), image, 0o600))
	link := keyfileDir + "/image-link.nmconnection"
	must(t, os.Symlink("../../../usr/share/image/nic.nmconnection", m.path(link)))
	must(t, m.nmcli("connection", "reload"))
	must(t, m.nmcli("connection", "up", "uuid", symlinkUUID))
	r.boot("symlinked image profile", m.waitAddr(start, cidr(bootstrap)))

	res := m.runAgent(nil)
	if res.code != 78 {
		t.Fatalf("agent exit %d, want 78 (a server profile that hides the image's)", res.code)
	}
	for _, want := range []string{"uuid " + symlinkUUID, "/" + link, "rule unique"} {
		if !strings.Contains(res.out, want) {
			t.Errorf("the agent's output does not name %q", want)
		}
	}
	if b, err := os.ReadFile(m.path(target)); err != nil || !bytes.Equal(b, image) {
		t.Errorf("the image's keyfile changed: %v\n%s", err, b)
	}
	for _, p := range []string{keyfileDir + "/" + nodeIf + ".nmconnection", applicator, manifest} {
		if m.exists(p) {
			t.Errorf("a refused config wrote %s", p)
		}
	}
	act, err := m.nmcliOut("-g", "GENERAL.CONNECTION", "device", "show", nodeIf)
	must(t, err)
	if strings.TrimSpace(act) != "image-link" {
		t.Errorf("%s is connected by %q, want the image's profile image-link", nodeIf, strings.TrimSpace(act))
	}
}
