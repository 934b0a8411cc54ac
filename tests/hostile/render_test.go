package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// TestRenderChecksTheNodeUnderRoot: `agent render --root R` makes the
// checks a run on the node at R makes: a keyfile that would replace a file
// the agent does not own, and one whose UUID an image profile has, are
// refused (exit 78) as the run refuses them. Without --root the plan is
// for another machine and, as documented, neither is checked.
func TestRenderChecksTheNodeUnderRoot(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	input := func(t *testing.T, uuid string) string {
		kf := strings.Replace(kfHead, "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", uuid, 1)
		doc := "configurator: nmconnections\nipAddresses: {ip1: 192.168.122.10}\nconfig:\n  eth0: |\n    " + strings.ReplaceAll(strings.TrimRight(kf, "\n"), "\n", "\n    ") + "\n"
		p := filepath.Join(t.TempDir(), "nc.yaml")
		testutil.Must(t, os.WriteFile(p, []byte(doc), 0o600))
		return p
	}
	for _, c := range []struct {
		name, uuid string
		plant      func(t *testing.T, m *node.Machine)
		words      []string
	}{
		{"uuid of an image profile", imageUUID, imageProfile, []string{"rule unique", imageUUID}},
		{"a keyfile not ours", "3f1c0d52-9b7e-4d1a-8f52-6a0c2d7e1b01", func(t *testing.T, m *node.Machine) {
			write(t, m.Root, "etc/NetworkManager/system-connections/eth0.nmconnection", "[connection]\nid=installer\ntype=ethernet\n")
		}, []string{"eth0.nmconnection", "not"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := node.New(t, "52:54:00:29:07:03", "http://127.0.0.1:9/elemental/registration/x", "")
			c.plant(t, m)
			f := input(t, c.uuid)
			before := testutil.Files(t, m.Root)
			code, _, final := runBinary(t, bin, nil, "render", "--root", m.Root, "--input", f, "--nmstate", "builtin")
			wantFinal(t, code, 78, final, append([]string{"render:"}, c.words...)...)
			if ch := testutil.Changed(before, testutil.Files(t, m.Root)); len(ch) > 0 {
				t.Errorf("render changed files under --root: %v", ch)
			}
			if code, _, final := runBinary(t, bin, nil, "render", "--input", f, "--nmstate", "builtin"); code != 0 {
				t.Errorf("without --root (another machine): exit %d, %s", code, final)
			}
		})
	}
}
