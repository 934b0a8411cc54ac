package apply

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nmLab is a real NetworkManager (Debian's network-manager) running in a
// network namespace of its own, on a private D-Bus, reading keyfiles from a
// scratch root (docs/apply.md). Its /run and /var/lib/NetworkManager are
// private tmpfs mounts so the host's state is left alone; DNS, hostname and
// default profiles are switched off for the same reason.
type nmLab struct {
	env []string // DBUS_SYSTEM_BUS_ADDRESS for nmcli
}

func startNM(t *testing.T, keyfileDir string) *nmLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and NetworkManager")
	}
	for _, b := range []string{"ip", "dbus-daemon", "NetworkManager", "nmcli", "unshare"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("needs %s (apt packages iproute2, dbus, network-manager, util-linux)", b)
		}
	}
	sum := sha256.Sum256([]byte(t.Name()))
	ns := fmt.Sprintf("nrapply%x%d", sum[:3], os.Getpid()%10000)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	dir := t.TempDir()
	bus := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "NM.conf")
	writeFile(t, dir, "NM.conf", "[main]\nplugins=keyfile\ndns=none\nrc-manager=unmanaged\nhostname-mode=none\nno-auto-default=*\n"+
		"[keyfile]\npath="+keyfileDir+"\n", 0o600)
	if err := os.MkdirAll(keyfileDir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "dbus-daemon", "--config-file=/usr/share/dbus-1/system.conf",
		"--address=unix:path="+bus, "--fork", "--nopidfile", "--print-pid").Output()
	if err != nil {
		t.Skipf("cannot start a private dbus-daemon: %v", err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
		t.Cleanup(func() {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		})
	}
	busEnv := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + bus
	nm := exec.Command("ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib/NetworkManager && exec env "$1" NetworkManager --no-daemon --config "$2" --state-file "$3"`,
		"sh", busEnv, conf, filepath.Join(dir, "NM.state"))
	logf, err := os.Create(filepath.Join(dir, "nm.log"))
	if err != nil {
		t.Fatal(err)
	}
	nm.Stdout, nm.Stderr = logf, logf
	if err := nm.Start(); err != nil {
		t.Skipf("cannot start NetworkManager: %v", err)
	}
	t.Cleanup(func() {
		nm.Process.Kill()
		nm.Wait()
		logf.Close()
	})
	lab := &nmLab{env: []string{busEnv}}
	// Readiness wait, not an assertion: NetworkManager takes a moment to
	// claim its bus name.
	for i := 0; ; i++ {
		c := exec.Command("nmcli", "-t", "general", "status")
		c.Env = append(os.Environ(), busEnv)
		if c.Run() == nil {
			return lab
		}
		if i == 100 {
			log, _ := os.ReadFile(filepath.Join(dir, "nm.log"))
			t.Skipf("NetworkManager did not come up:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// profiles lists the connection ids NetworkManager has loaded.
func (l *nmLab) profiles(t *testing.T) []string {
	t.Helper()
	c := exec.Command("nmcli", "-t", "-f", "NAME", "connection", "show")
	c.Env = append(os.Environ(), l.env...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("nmcli connection show: %v", err)
	}
	return strings.Fields(string(out))
}

// nmcli runs nmcli against the lab's NetworkManager.
func (l *nmLab) nmcli(t *testing.T, args ...string) string {
	t.Helper()
	c := exec.Command("nmcli", args...)
	c.Env = append(os.Environ(), l.env...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("nmcli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkpoint creates a NetworkManager checkpoint of every device over
// D-Bus, with the flags nmstate creates its own with (delete new
// connections, disconnect new devices), and returns its path.
func (l *nmLab) checkpoint(t *testing.T) string {
	t.Helper()
	out := l.gdbus(t, "CheckpointCreate", "[]", "60", "6")
	// (objectpath '/org/freedesktop/NetworkManager/Checkpoint/1',)
	_, rest, ok := strings.Cut(out, "'")
	cp, _, ok2 := strings.Cut(rest, "'")
	if !ok || !ok2 {
		t.Fatalf("CheckpointCreate said %q", out)
	}
	return cp
}

// rollback rolls the checkpoint back, as nmstatectl rollback does.
func (l *nmLab) rollback(t *testing.T, cp string) {
	t.Helper()
	l.gdbus(t, "CheckpointRollback", "'"+cp+"'")
}

func (l *nmLab) gdbus(t *testing.T, method string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gdbus"); err != nil {
		t.Skip("needs gdbus (apt package libglib2.0-bin) for NetworkManager's checkpoints")
	}
	argv := append([]string{"call", "--system", "--dest", "org.freedesktop.NetworkManager",
		"--object-path", "/org/freedesktop/NetworkManager", "--method", "org.freedesktop.NetworkManager." + method}, args...)
	c := exec.Command("gdbus", argv...)
	c.Env = append(os.Environ(), l.env...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("gdbus %s: %v\n%s", method, err, out)
	}
	return string(out)
}

// profilesOf lists the UUIDs of the profiles NetworkManager holds for
// interface dev, with the file each is stored in.
func (l *nmLab) profilesOf(t *testing.T, dev string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for file, uuid := range parseProfiles([]byte(l.nmcli(t, "-t", "-f", "UUID,FILENAME", "connection", "show"))) {
		if strings.TrimSpace(l.nmcli(t, "-g", "connection.interface-name", "connection", "show", "uuid", uuid)) == dev {
			out[uuid] = file
		}
	}
	return out
}

// active lists the UUIDs of the active connections.
func (l *nmLab) active(t *testing.T) map[string]bool {
	t.Helper()
	return parseUUIDs(l.nmcli(t, "-t", "-f", "UUID", "connection", "show", "--active"))
}

func parseUUIDs(out string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(out) {
		m[f] = true
	}
	return m
}
