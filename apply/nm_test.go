package apply

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/nmlab"
)

// nmLab is a real NetworkManager (Debian's network-manager) in a network
// namespace of its own, on a private D-Bus, reading keyfiles from a
// scratch root (docs/apply.md): internal/testutil/nmlab's, which leaves the
// host's state alone.
type nmLab struct {
	env []string // DBUS_SYSTEM_BUS_ADDRESS for nmcli
}

func startNM(t *testing.T, keyfileDir string) *nmLab {
	t.Helper()
	l := nmlab.StartReading(t, "apply's NetworkManager tests", keyfileDir, nil)
	return &nmLab{env: []string{l.BusEnv}}
}

// profiles lists the connection ids NetworkManager has loaded, but the
// loopback's: a lab's NetworkManager manages lo (its udevd announces it)
// and makes a profile of its own for it, which no keyfile of the applier's
// can be.
func (l *nmLab) profiles(t *testing.T) []string {
	t.Helper()
	c := exec.Command("nmcli", "-t", "-f", "TYPE,NAME", "connection", "show")
	c.Env = append(os.Environ(), l.env...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("nmcli connection show: %v", err)
	}
	var ids []string
	for _, line := range strings.Fields(string(out)) {
		if typ, id, _ := strings.Cut(line, ":"); typ != "loopback" {
			ids = append(ids, id)
		}
	}
	return ids
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
