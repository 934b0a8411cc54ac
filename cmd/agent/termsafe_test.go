package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderPrintsResourceStringsEscaped: a MachineRegistration's name,
// namespace and pool names, and a cloud-config's stage name and file
// path, holding ESC sequences (set the window title, clear the screen),
// reach the terminal escaped as %q does, on stdout and in the error on
// stderr alike (docs/reliability.md).
func TestRenderPrintsResourceStringsEscaped(t *testing.T) {
	const title, clear = "\x1b]0;owned\a", "\x1b[2J\x1b[H"
	mr := "apiVersion: elemental.cattle.io/v1beta1\nkind: MachineRegistration\nmetadata:\n" +
		"  name: \"fleet" + `\x1b]0;owned\a` + "\"\n  namespace: \"ns" + `\x1b[2J\x1b[H` + "\"\n" +
		"spec:\n  config:\n    network:\n      configurator: nmstate\n      ipAddresses:\n        ip:\n" +
		"          apiGroup: ipam.cluster.x-k8s.io\n          kind: \"InClusterIPPool" + `\x1b[31m` + "\"\n          name: \"pool" + `\x1b]0;owned\a` + "\"\n" +
		"      config:\n        interfaces:\n        - name: eth0\n          type: ethernet\n          state: up\n" +
		"          ipv4: {enabled: true, address: [{ip: \"{ip}\", prefix-length: 24}]}\n"
	noNetwork := "apiVersion: elemental.cattle.io/v1beta1\nkind: MachineRegistration\nmetadata:\n  name: \"x" + `\x1b[2J` + "\"\nspec: {}\n"
	cloud := "stages:\n  \"boot" + `\x1b]0;owned\a` + "\":\n  - name: b\n    files:\n    - path: \"/etc/x" + `\x1b[2J` + ".yaml\"\n      content: |\n" +
		"        elemental:\n          registration:\n            bootstrap-network:\n              configurator: nmconnections\n"
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string // escaped, in the output
	}{
		{"MachineRegistration", []string{"render", "-f", write("mr.yaml", mr)}, 0,
			[]string{`"ns\x1b[2J\x1b[H/fleet\x1b]0;owned\a"`, `InClusterIPPool\x1b[31m`, `pool\x1b]0;owned\a`}},
		{"an error naming it", []string{"render", "-f", write("none.yaml", noNetwork)}, 78, []string{`x\x1b[2J`}},
		{"a cloud-config", []string{"render", "--bootstrap", "-f", write("cloud.yaml", cloud), "--set", "mac=52:54:00:00:00:01"}, 78,
			[]string{`boot\x1b]0;owned\a`, `/etc/x\x1b[2J.yaml`}},
	} {
		code, stdout, stderr := run(c.args...)
		all := stdout + stderr
		if code != c.code {
			t.Errorf("%s: exit %d, want %d:\n%s", c.name, code, c.code, all)
		}
		if strings.Contains(all, "\x1b") || strings.Contains(all, "\a") || strings.Contains(all, title) || strings.Contains(all, clear) {
			t.Errorf("%s: a raw control character reached the terminal: %q", c.name, all)
		}
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: output lacks %s escaped:\n%s", c.name, w, all)
			}
		}
	}
}
