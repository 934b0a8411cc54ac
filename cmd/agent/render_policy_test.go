package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// render judges a config by the network policy of the node's config file
// under --root: the default refuses a rule the node allows, the node that
// allows it gets the preview its runs would make; a --config-path that is
// named and missing is an error, an unreadable policy too.
func TestRenderTakesTheNodesPolicy(t *testing.T) {
	nc := filepath.Join(t.TempDir(), "nc.yaml")
	cfg := "configurator: nmconnections\nconfig:\n  eth0: |\n    [connection]\n    id=eth0\n    type=ethernet\n    interface-name=eth0\n    [proxy]\n    method=1\n    pac-url=http://proxy.invalid/wpad.dat\n"
	if err := os.WriteFile(nc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if code, _, stderr := run("--root", root, "render", "-f", nc); code != 78 || !strings.Contains(stderr, "rule proxy") {
		t.Fatalf("no config file: exit %d, %s; want 78 by rule proxy", code, stderr)
	}
	conf := filepath.Join(root, "oem/registration/config.yaml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(text string) {
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("elemental:\n  registration:\n    url: https://rancher.invalid/r\n    network-policy: {allow: [proxy]}\n")
	code, stdout, stderr := run("--root", root, "render", "-f", nc)
	if code != 0 || !strings.Contains(stdout, "pac-url=http://proxy.invalid/wpad.dat") {
		t.Fatalf("node allowing proxy: exit %d, %s\n%s", code, stderr, stdout)
	}
	write("elemental:\n  registration:\n    network-policy: {allow: [unique]}\n")
	if code, _, stderr := run("--root", root, "render", "-f", nc); code != 78 || !strings.Contains(stderr, "network-policy") {
		t.Errorf("a policy that cannot be read: exit %d, %s; want 78 naming the key", code, stderr)
	}
	if code, _, stderr := run("--root", root, "render", "-f", nc, "--config-path", "/oem/other.yaml"); code != 78 || !strings.Contains(stderr, "other.yaml") {
		t.Errorf("a named config file that is missing: exit %d, %s; want 78 naming it", code, stderr)
	}
}

// The render's shape: R/oem leads outside R, where a config file
// opts in to the rule the config needs. render --root R reads the node's
// policy inside R only (the link followed with R as "/": no config file
// there, the default policy), so the config is refused as without --root.
func TestRenderUnderRootReadsNoPolicyOutside(t *testing.T) {
	nc := filepath.Join(t.TempDir(), "nc.yaml")
	cfg := "configurator: nmconnections\nconfig:\n  eth0: |\n    [connection]\n    id=eth0\n    type=ethernet\n    interface-name=eth0\n    [proxy]\n    method=1\n    pac-url=http://proxy.invalid/wpad.dat\n"
	if err := os.WriteFile(nc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "registration"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "registration/config.yaml"), []byte("elemental:\n  registration:\n    url: https://rancher.invalid/r\n    network-policy: {allow: [proxy]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, shape := range []string{"absolute", "relative"} {
		root := t.TempDir()
		target := outside
		if shape == "relative" {
			rel, err := filepath.Rel(root, outside)
			if err != nil {
				t.Fatal(err)
			}
			target = rel
		}
		if err := os.Symlink(target, filepath.Join(root, "oem")); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := run("--root", root, "render", "-f", nc); code != 78 || !strings.Contains(stderr, "rule proxy") {
			t.Errorf("%s link R/oem -> outside: exit %d, %s; want 78 by rule proxy (the policy outside R not read)", shape, code, stderr)
		}
	}
}
