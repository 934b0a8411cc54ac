package localconfig

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

// operatorConfig is a config as the operator generates it from a
// MachineRegistration: upstream's keys only, no bootstrap block.
const operatorConfig = `elemental:
  registration:
    url: https://reg.example/elemental/registration/t
    auth: mac
`

const bootstrapDropIn = `elemental:
  registration:
    bootstrap-network:
      configurator: nmconnections
      config:
        boot: |
          [connection]
          id=boot
          type=ethernet
          [ipv4]
          method=manual
          address1={ip}/24
      ipAddresses:
        ip:
          static:
          - mac: "52:54:00:00:00:01"
            address: 192.168.122.20
`

func writeFile(t *testing.T, root, p, text string, perm os.FileMode) {
	t.Helper()
	testutil.WriteFile(t, root, p, text, perm)
}

func TestDropInBringsTheBootstrapBlock(t *testing.T) {
	for _, dir := range []string{"/oem/registration/config.d", host.RuntimeConfigDropIns} {
		t.Run(dir, func(t *testing.T) {
			root := t.TempDir()
			writeConfig(t, root, operatorConfig)
			writeFile(t, root, dir+"/50-bootstrap.yaml", bootstrapDropIn, 0o600)
			log, buf := captureLog()
			f, err := Read(host.Root(root), host.ConfigFile, Overrides{}, log)
			if err != nil {
				t.Fatal(err)
			}
			b, err := f.Bootstrap()
			if err != nil || b == nil {
				t.Fatalf("bootstrap block from the drop-in: %v, %v", b, err)
			}
			if f.Config.Elemental.Registration.Auth != AuthMAC {
				t.Errorf("the config file's auth lost: %+v", f.Config.Elemental.Registration)
			}
			if !strings.Contains(buf.String(), "50-bootstrap.yaml") {
				t.Errorf("the merged drop-in is not logged:\n%s", buf.String())
			}
			// render --bootstrap sees the same merge.
			if c, _, err := ReadBootstrap(host.Root(root), host.ConfigFile, nil); err != nil || c == nil {
				t.Errorf("ReadBootstrap: %v, %v", c, err)
			}
		})
	}
}

// The config file wins over every drop-in, a later drop-in over an
// earlier one (config.d beside the file before /run's), and each key set
// twice is reported.
func TestDropInPrecedence(t *testing.T) {
	root := t.TempDir()
	writeConfig(t, root, operatorConfig)
	writeFile(t, root, "/oem/registration/config.d/10-a.yaml", "elemental:\n  registration:\n    auth: sys-uuid\n    tpm-device: /dev/tpm9\n", 0o644)
	writeFile(t, root, "/oem/registration/config.d/20-b.yaml", "elemental:\n  registration:\n    tpm-device: /dev/tpm8\n", 0o644)
	writeFile(t, root, host.RuntimeConfigDropIns+"/05-c.yaml", "elemental:\n  registration:\n    no-smbios: true\n    tpm-device: /dev/tpm7\n", 0o644)
	writeFile(t, root, host.RuntimeConfigDropIns+"/README", "not a drop-in", 0o644)
	writeFile(t, root, host.RuntimeConfigDropIns+"/.60-x.yaml", "elemental: {registration: {auth: tpm}}", 0o644)
	log, buf := captureLog()
	f, err := Read(host.Root(root), host.ConfigFile, Overrides{}, log)
	if err != nil {
		t.Fatal(err)
	}
	r := f.Config.Elemental.Registration
	if r.Auth != AuthMAC || r.TPMDevice != "/dev/tpm7" || !r.NoSMBIOS {
		t.Errorf("merged: auth %q tpm-device %q no-smbios %v; want mac (the file's), /dev/tpm7 (the last drop-in's), true", r.Auth, r.TPMDevice, r.NoSMBIOS)
	}
	out := buf.String()
	for _, want := range []string{
		"10-a.yaml:3: elemental.registration.auth is set in the config file",
		"20-b.yaml:3: elemental.registration.tpm-device replaces the one of the earlier drop-in",
		"05-c.yaml:4: elemental.registration.tpm-device replaces",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if len(f.DropIns) != 3 || strings.Contains(out, "README") || strings.Contains(out, ".60-x") {
		t.Errorf("drop-ins %q (want the three *.yaml, in order)", f.DropIns)
	}
}

func TestDropInUnknownKeyNamesTheDropIn(t *testing.T) {
	root := t.TempDir()
	writeConfig(t, root, operatorConfig)
	writeFile(t, root, host.RuntimeConfigDropIns+"/50-x.yaml", "elemental:\n  registration:\n    bootstrap_network: {}\n", 0o600)
	log, buf := captureLog()
	if _, err := Read(host.Root(root), host.ConfigFile, Overrides{}, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "50-x.yaml:3: unknown key elemental.registration.bootstrap_network") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// Refused, each a configuration error naming the drop-in: links (to a
// secret or a device), a FIFO, a file others may write, a key outside
// elemental.registration, too many or too large drop-ins.
func TestDropInRefused(t *testing.T) {
	dir := host.RuntimeConfigDropIns
	for _, c := range []struct {
		name, want string
		plant      func(t *testing.T, root string)
	}{
		{"symlink to a secret", "not a regular file (a symlink)", func(t *testing.T, root string) {
			writeFile(t, root, "/etc/shadow", "root:hunter2\n", 0o600)
			mkdir(t, root, dir)
			symlink(t, filepath.Join(root, "etc/shadow"), filepath.Join(root, dir, "50-x.yaml"))
		}},
		{"symlinked directory", "not a directory (a symlink)", func(t *testing.T, root string) {
			writeFile(t, root, "/etc/x/a.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			mkdir(t, root, "/run/nodereg")
			symlink(t, filepath.Join(root, "etc/x"), filepath.Join(root, dir))
		}},
		{"fifo", "not a regular file (a FIFO)", func(t *testing.T, root string) {
			mkdir(t, root, dir)
			if err := mkfifo(filepath.Join(root, dir, "50-x.yaml")); err != nil {
				t.Skip("no mkfifo here:", err)
			}
		}},
		{"world-writable file", "writable by group or others", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o666)
		}},
		{"world-writable directory", "writable by group or others", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			if err := os.Chmod(filepath.Join(root, dir), 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		// Everything the agent trusts is root's: the drop-in, its
		// directory and each directory above them up to the root.
		{"foreign-owned drop-in", "config.d/50-x.yaml: owned by uid 65534, not root", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chown(t, filepath.Join(root, dir, "50-x.yaml"), nobody)
		}},
		{"foreign-owned directory", "/run/nodereg/config.d: owned by uid 65534, not root", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chown(t, filepath.Join(root, dir), nobody)
		}},
		{"foreign-owned directory above", "the directory above it " + "%ROOT%/run: owned by uid 65534, not root", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chown(t, filepath.Join(root, "run"), nobody)
		}},
		{"world-writable directory above", "the directory above it %ROOT%/run/nodereg: writable by group or others (0777, owner uid 0)", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chmod(t, filepath.Join(root, "run/nodereg"), 0o777)
		}},
		{"sticky world-writable directory above", "the directory above it %ROOT%/run: writable by group or others (0777, owner uid 0)", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chmod(t, filepath.Join(root, "run"), 0o777|os.ModeSticky)
		}},
		{"group-writable root", "the directory above it %ROOT%: writable by group or others (0770, owner uid 0)", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental: {registration: {auth: tpm}}", 0o600)
			chmod(t, root, 0o770)
		}},
		// The attack's shape: in a parent anyone may write, a user renamed
		// config.d away and made their own, opting in to method=shared.
		{"config.d swapped in a writable parent", "/oem/registration/config.d: owned by uid 65534, not root", func(t *testing.T, root string) {
			writeFile(t, root, "/oem/registration/config.d/10-admin.yaml", "elemental: {registration: {auth: mac}}", 0o600)
			chmod(t, filepath.Join(root, "oem/registration"), 0o777)
			must(t, os.Rename(filepath.Join(root, "oem/registration/config.d"), filepath.Join(root, "oem/registration/config.d.old")))
			writeFile(t, root, "/oem/registration/config.d/50-policy.yaml", "elemental:\n  registration:\n    network-policy:\n      allow: [shared]\n", 0o600)
			chown(t, filepath.Join(root, "oem/registration/config.d"), nobody)
			chown(t, filepath.Join(root, "oem/registration/config.d/50-policy.yaml"), nobody)
		}},
		// The config file decides as much as a drop-in: the same rule.
		{"world-writable config file", "config file %ROOT%/oem/registration/config.yaml: writable by group or others (0666, owner uid 0)", func(t *testing.T, root string) {
			chmod(t, filepath.Join(root, host.ConfigFile), 0o666)
		}},
		{"foreign-owned config file", "config file %ROOT%/oem/registration/config.yaml: owned by uid 65534, not root", func(t *testing.T, root string) {
			chown(t, filepath.Join(root, host.ConfigFile), nobody)
		}},
		{"key outside registration", "elemental.install: a drop-in holds only keys under elemental.registration", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "elemental:\n  install:\n    device: /dev/sda\n", 0o600)
		}},
		{"top-level key", "cloud-config: a drop-in holds only keys", func(t *testing.T, root string) {
			writeFile(t, root, dir+"/50-x.yaml", "cloud-config: {}\n", 0o600)
		}},
		{"too many", "at most 32 are read", func(t *testing.T, root string) {
			for i := range MaxDropIns + 1 {
				writeFile(t, root, dir+"/"+strings.Repeat("a", i+1)+".yaml", "", 0o600)
			}
		}},
		{"too large in all", "at most 1048576 bytes in all", func(t *testing.T, root string) {
			big := "# " + strings.Repeat("x", MaxDropInBytes/2) + "\n"
			for _, n := range []string{"a", "b", "c"} {
				writeFile(t, root, dir+"/"+n+".yaml", big, 0o600)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeConfig(t, root, operatorConfig)
			c.plant(t, root)
			_, err := Read(host.Root(root), host.ConfigFile, Overrides{}, nil)
			want := strings.ReplaceAll(c.want, "%ROOT%", root)
			if err == nil || !strings.Contains(err.Error(), want) || exitcode.Of(err) != exitcode.Config {
				t.Fatalf("err %v (exit %d), want a configuration error with %q", err, exitcode.Of(err), want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the link's target's content: %v", err)
			}
			t.Log(err)
		})
	}
}

func mkdir(t *testing.T, root, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }

// nobody is the uid a test plants as another user's.
const nobody = 65534

// chown gives p to uid; only root may, so the case is skipped otherwise.
func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("planting another owner needs root")
	}
	must(t, os.Lchown(p, uid, uid))
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	must(t, os.Chmod(p, mode))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
