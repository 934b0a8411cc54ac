package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/netpolicy"
)

// libNoUUID is the UUID NetworkManager 1.42.4 gave a profile without uuid=
// at /usr/lib/NetworkManager/system-connections/lib-eth1.nmconnection
// (nmcli connection show, its keyfile path the default one).
const libNoUUID = "ec7c7f7d-ddf1-3651-aa5d-f12114e4f9a2"

// TestPolicyUniqueByNetworkManagersRules: image profiles NetworkManager
// loads that the unique rule used to miss (docs/reliability.md,
// "Network-config policy"): one reached through a symlink, one without
// uuid= (its UUID derived from the file name), claimed by the server's
// keyfile in upper case. Each is refused with exit 78, nothing written.
func TestPolicyUniqueByNetworkManagersRules(t *testing.T) {
	const linked = "6a1e3c55-0d2b-4c7e-8f1a-2b3c4d5e6f70"
	image := func(id, uuid string) string {
		s := "[connection]\nid=" + id + "\n"
		if uuid != "" {
			s += "uuid=" + uuid + "\n"
		}
		return s + "type=ethernet\ninterface-name=eth1\n\n[ipv4]\nmethod=auto\n"
	}
	for _, c := range []struct {
		name, claimed string
		plant         func(t *testing.T, root string)
	}{
		{"symlinked image profile", strings.ToUpper(linked), func(t *testing.T, root string) {
			write(t, root, "usr/share/image/eth1.nmconnection", image("image-link", linked))
			link := filepath.Join(root, "etc/NetworkManager/system-connections/image-link.nmconnection")
			testutil.Must(t, os.MkdirAll(filepath.Dir(link), 0o755))
			testutil.Must(t, os.Symlink("/usr/share/image/eth1.nmconnection", link))
		}},
		{"image profile without uuid", strings.ToUpper(libNoUUID), func(t *testing.T, root string) {
			write(t, root, "usr/lib/NetworkManager/system-connections/lib-eth1.nmconnection", image("lib-eth1", ""))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := policyAttack{name: c.name, configurator: "nmconnections",
				config: map[string]any{"eth0": strings.Replace(kfHead, "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", c.claimed, 1)},
				path:   "config.eth0.nmconnection [connection] uuid", rule: netpolicy.Unique}
			m := node.New(t, "52:54:00:29:03:01", policyServer(t, a), "")
			c.plant(t, m.Root)
			refusedUnchanged(t, m, a, agent.Options{})
		})
	}
}

// write puts a root-only file under root, as an image carries it.
func write(t *testing.T, root, p, text string) {
	t.Helper()
	testutil.WriteFile(t, root, p, text, 0o600)
}
