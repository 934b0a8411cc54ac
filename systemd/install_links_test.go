package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallRefusesLinksOutOfDestdir plants, in the tree make install
// writes into, each kind of link that leads out of DESTDIR (docs/reliability.md): a
// directory on the way to a target (usr/sbin, the unit directory, usr
// itself, the admin's unit directory under ELEMENTAL_REGISTER=replace or
// SYSTEMD_ENABLE=yes, a .wants directory in it that systemctl --root
// enable writes into)
// linked to a directory outside, and a staging name (*.nodereg-new) linked
// to a file outside. Each install is refused before it writes anything,
// naming the link: the outside directory and the tree are as they were,
// and no outside elemental-register is renamed.
func TestInstallRefusesLinksOutOfDestdir(t *testing.T) {
	agent, _ := builtAgent(t)
	cases := []struct {
		name     string
		upstream bool   // an Elemental image, installed with ELEMENTAL_REGISTER=replace
		link     string // in the root, linked to the outside directory, or to its victim file with file set
		file     bool
		want     string
		enable   bool // SYSTEMD_ENABLE=yes: systemctl --root writes into the admin's unit directory
	}{
		{name: "usr/sbin a link", link: "usr/sbin", want: "is a symlink"},
		{name: "the unit directory a link", link: "usr/lib/systemd/system", want: "is a symlink"},
		{name: "usr a link", link: "usr", want: "is a symlink"},
		{name: "the agent's staging name", link: "usr/sbin/nodereg-agent.nodereg-new", file: true, want: "nodereg-new exists already"},
		{name: "a unit's staging name", link: "usr/lib/systemd/system/nodereg.service.nodereg-new", file: true, want: "nodereg-new exists already"},
		{name: "the compatibility link's staging name", link: "usr/sbin/elemental-register.nodereg-new", file: true, want: "nodereg-new exists already"},
		{name: "enable: the admin's unit directory a link", link: "etc/systemd/system", want: "is a symlink", enable: true},
		{name: "enable: a .wants directory a link", link: "etc/systemd/system/multi-user.target.wants", want: "is a symlink", enable: true},
		{name: "replace: usr/sbin a link", upstream: true, link: "usr/sbin", want: "is a symlink"},
		{name: "replace: the admin's unit directory a link", upstream: true, link: "etc/systemd/system", want: "is a symlink"},
		{name: "replace: a mask's staging name", upstream: true, link: "etc/systemd/system/elemental-register.timer.nodereg-new", file: true, want: "nodereg-new exists already"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			var root string
			if c.upstream {
				root = upstreamRoot(t)
			} else {
				root = filepath.Join(t.TempDir(), "root")
				must(t, os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755))
				must(t, os.MkdirAll(filepath.Join(root, "usr/lib/systemd/system"), 0o755))
			}
			// Outside: a copy of what the link stands for, with an
			// elemental-register of its own and a victim file.
			outside := t.TempDir()
			must(t, os.WriteFile(filepath.Join(outside, "elemental-register"), []byte("#!/bin/sh\necho outside\n"), 0o700))
			must(t, os.WriteFile(filepath.Join(outside, "victim"), []byte("precious\n"), 0o600))
			planted := filepath.Join(root, c.link)
			target := outside
			if c.file {
				target = filepath.Join(outside, "victim")
			} else {
				// The directory's content moves outside, the link takes its place.
				if _, err := os.Stat(planted); err == nil {
					must(t, os.Rename(planted, filepath.Join(outside, "moved")))
					target = filepath.Join(outside, "moved")
				}
			}
			must(t, os.MkdirAll(filepath.Dir(planted), 0o755))
			must(t, os.Symlink(target, planted))

			beforeRoot, beforeOut := snapshot(t, root), snapshot(t, outside)
			modes := modesOf(t, outside)
			vars := []string{"DESTDIR=" + root, "AGENT_BIN=" + agent}
			if c.upstream {
				vars = append(vars, "ELEMENTAL_REGISTER=replace")
			}
			if c.enable {
				vars = append(vars, "SYSTEMD_ENABLE=yes")
			}
			out, err := runMake(t, vars...)
			if err == nil || !strings.Contains(out, c.want) || !strings.Contains(out, "nothing written") || !strings.Contains(out, planted) {
				t.Fatalf("make install: err %v, want a refusal naming %s (%q, nothing written):\n%s", err, planted, c.want, out)
			}
			if after := snapshot(t, outside); !mapsEqual(beforeOut, after) {
				t.Errorf("written outside DESTDIR:\nbefore %v\nafter  %v", beforeOut, after)
			}
			if after := modesOf(t, outside); !mapsEqual(modes, after) {
				t.Errorf("modes changed outside DESTDIR: %v, then %v", modes, after)
			}
			if after := snapshot(t, root); !mapsEqual(beforeRoot, after) {
				t.Errorf("a refused install changed the root:\nbefore %v\nafter  %v", keys(beforeRoot), keys(after))
			}
		})
	}
}

// modesOf is every file's mode under root (chmod through a staging link
// changes the mode of what it points at).
func modesOf(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range tree(t, root) {
		fi, err := os.Lstat(filepath.Join(root, p))
		must(t, err)
		m[p] = fi.Mode().String()
	}
	return m
}

// TestInstallStagingNamePlantedMidway: a staging name planted after the
// check, while the install runs (here by a mkdir on PATH that plants it
// the moment the install makes usr/sbin), is neither written through nor
// removed: the install fails, the file outside and the planted link are
// as they were, and nothing is installed.
func TestInstallStagingNamePlantedMidway(t *testing.T) {
	agent, _ := builtAgent(t)
	root := filepath.Join(t.TempDir(), "root")
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	must(t, os.WriteFile(victim, []byte("precious\n"), 0o600))
	staging := filepath.Join(root, "usr/sbin/nodereg-agent.nodereg-new")
	realMkdir, err := exec.LookPath("mkdir")
	if err != nil {
		t.Skip("no mkdir")
	}
	bin := t.TempDir()
	wrapper := "#!/bin/sh\n" + realMkdir + " \"$@\" || exit\n" +
		"[ -e '" + staging + "' ] || [ -L '" + staging + "' ] || ln -s '" + victim + "' '" + staging + "' 2>/dev/null\nexit 0\n"
	must(t, os.WriteFile(filepath.Join(bin, "mkdir"), []byte(wrapper), 0o755))
	out, err := runMake(t, "DESTDIR="+root, "AGENT_BIN="+agent, "PATH="+bin+":"+os.Getenv("PATH"))
	if err == nil {
		t.Fatalf("make install with a staging name planted midway succeeded:\n%s", out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("written through the planted staging name: %q", b)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file outside changed mode: %v %v", fi.Mode(), err)
	}
	if got, err := os.Readlink(staging); err != nil || got != victim {
		t.Errorf("the planted link was removed or changed: %q %v", got, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "usr/sbin/nodereg-agent")); err == nil {
		t.Errorf("the agent was installed although the install failed")
	}
}
