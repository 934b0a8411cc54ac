// Package nmlab runs a real NetworkManager (Debian's network-manager) for
// a test: in a network namespace of its own (labkit.Pair's Node, its peers
// in Peer), on a private D-Bus, in a private mount namespace whose /run and
// /var/lib/NetworkManager are directories of the test, so the test reads
// the keyfiles NetworkManager writes under /etc (Lab.Etc) and /run
// (Lab.Run) and the host's NetworkManager and files are left alone. DNS,
// hostname and default profiles are off for the same reason. Only tests
// import it.
package nmlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

const udevd = "/lib/systemd/systemd-udevd"

// Lab is one running NetworkManager.
type Lab struct {
	Pair *labkit.Pair
	// BusEnv is DBUS_SYSTEM_BUS_ADDRESS=... for nmcli, busctl and the
	// nmstatectl stand-in.
	BusEnv string
	// Etc and Run are NetworkManager's keyfile directories as the test
	// sees them (/etc/NetworkManager/system-connections and
	// /run/NetworkManager/system-connections inside).
	Etc, Run string
	log      string
}

// Start starts NetworkManager in a fresh namespace pair after setup has
// built the links (setup gets the pair before NetworkManager sees them). It
// skips the test when root, the packages or namespaces are missing.
func Start(t testing.TB, who string, setup func(p *labkit.Pair)) *Lab {
	t.Helper()
	return StartReading(t, who, "", setup)
}

// StartReading is Start with NetworkManager reading its keyfiles from
// keyfileDir (a scratch root's keyfile directory, which then is Etc); ""
// is a directory of the test's own.
func StartReading(t testing.TB, who, keyfileDir string, setup func(p *labkit.Pair)) *Lab {
	t.Helper()
	for _, b := range []string{"ip", "dbus-daemon", "NetworkManager", "nmcli", "unshare", "busctl", "udevadm", udevd} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s: needs %s (apt packages iproute2, dbus, network-manager, util-linux, systemd, udev)", who, b)
		}
	}
	p := labkit.NewPair(t, "nmlab", who)
	if setup != nil {
		setup(p)
	}
	dir := t.TempDir()
	if keyfileDir == "" {
		keyfileDir = filepath.Join(dir, "etc")
	}
	l := &Lab{Pair: p, Etc: keyfileDir, Run: filepath.Join(dir, "run", "NetworkManager", "system-connections"), log: filepath.Join(dir, "nm.log")}
	for _, d := range []string{l.Etc, filepath.Join(dir, "run"), filepath.Join(dir, "varlib")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	labkit.IP(t, p.Node, "link", "set", "lo", "up")
	// A udevd of the namespace's own: the kernel sends a namespace's
	// uevents only into it, and NetworkManager leaves a device without a
	// udev database entry unmanaged.
	privately := func(script string, args ...string) *exec.Cmd {
		argv := labkit.InNS(p.Node, append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /run && mount --bind "$2" /var/lib/NetworkManager && shift 2 && ` + script, "sh",
			filepath.Join(dir, "run"), filepath.Join(dir, "varlib")}, args...)...)
		return exec.Command(argv[0], argv[1:]...)
	}
	ud := privately(`exec "$1"`, udevd)
	if err := ud.Start(); err != nil {
		t.Skipf("%s: cannot start udevd: %v", who, err)
	}
	t.Cleanup(func() {
		ud.Process.Kill()
		ud.Wait()
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, "run", "udev", "control")); err == nil {
			break
		}
		if i == 300 {
			t.Skipf("%s: udevd did not come up", who)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := privately(`udevadm trigger --action=add --subsystem-match=net && udevadm settle --timeout=30`).CombinedOutput(); err != nil {
		t.Fatalf("%s: udevadm: %v: %s", who, err, out)
	}
	conf := filepath.Join(dir, "NM.conf")
	if err := os.WriteFile(conf, []byte("[main]\nplugins=keyfile\ndns=none\nrc-manager=unmanaged\nhostname-mode=none\nno-auto-default=*\n"+
		"[keyfile]\npath="+l.Etc+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bus := filepath.Join(dir, "bus")
	dbus := labkit.InNS(p.Node, "dbus-daemon", "--config-file=/usr/share/dbus-1/system.conf",
		"--address=unix:path="+bus, "--fork", "--nopidfile", "--print-pid")
	out, err := exec.Command(dbus[0], dbus[1:]...).Output()
	if err != nil {
		t.Skipf("%s: cannot start a private dbus-daemon: %v", who, err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
		t.Cleanup(func() {
			if pr, err := os.FindProcess(pid); err == nil {
				pr.Kill()
			}
		})
	}
	l.BusEnv = "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + bus
	nm := privately(`exec env "$1" NetworkManager --no-daemon --config "$2" --state-file "$3"`, l.BusEnv, conf, filepath.Join(dir, "NM.state"))
	logf, err := os.Create(l.log)
	if err != nil {
		t.Fatal(err)
	}
	nm.Stdout, nm.Stderr = logf, logf
	if err := nm.Start(); err != nil {
		t.Skipf("%s: cannot start NetworkManager: %v", who, err)
	}
	t.Cleanup(func() {
		nm.Process.Kill()
		nm.Wait()
		logf.Close()
	})
	// Readiness wait, not an assertion: NetworkManager takes a moment to
	// claim its bus name and to see the links.
	for i := 0; ; i++ {
		if out, err := l.Nmcli("-g", "STATE", "general"); err == nil && out != "" && !strings.Contains(out, "starting") {
			return l
		}
		if i == 300 {
			t.Skipf("%s: NetworkManager did not come up:\n%s", who, l.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Log is NetworkManager's log so far.
func (l *Lab) Log() string {
	b, _ := os.ReadFile(l.log)
	return string(b)
}

// Nmcli runs nmcli against the lab's NetworkManager.
func (l *Lab) Nmcli(args ...string) (string, error) {
	c := exec.Command("nmcli", args...)
	c.Env = append(os.Environ(), l.BusEnv)
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("nmcli %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Veth makes link name in p.Node, down, with its peer (up) in p.Peer, as
// the recorded set-up's eth0 and eth1: NetworkManager brings it up.
func Veth(t testing.TB, p *labkit.Pair, name string) {
	t.Helper()
	peer := name + "p"
	labkit.IP(t, p.Node, "link", "add", name, "type", "veth", "peer", "name", peer, "netns", p.Peer)
	labkit.IP(t, p.Peer, "link", "set", peer, "up")
}
