//go:build vmlab

package vm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// B8: power cuts (SIGKILL of QEMU, no shutdown) during a first boot's apply
// and during a live change, then a boot that must converge without a person
// (docs/vmlab.md, B8). Each cut point is a machine of its own; the point is
// the phase the agent reports in STATUS= plus a delay, seen by a watcher in
// the guest that writes a marker to the serial console.

// cutPoint is where one B8 machine loses power.
type cutPoint struct {
	name   string // the cut's name in VMLAB_B8_POINTS and the case name
	unit   string // whose STATUS= is watched
	status string // the STATUS prefixes that arm the cut (a shell case pattern)
	// and (when set) a shell test that must hold too: the agent's STATUS
	// says apply, not which of its writes runs
	also  string
	delay time.Duration // after the watcher saw it
	what  string        // what the agent is writing there (docs/apply.md's order)
}

var cutPoints = []cutPoint{
	{"keyfiles", "nodereg.service", "'apply: started'*", "", 0, "the keyfiles (written first, then brought up)"},
	// Persist writes the applicator among its /oem files after the live
	// apply's check: its name (or its temporary file's) under /oem marks
	// that the writes to /oem are under way.
	{"oem", "nodereg.service", "'apply: started'*", "ls -a /oem | grep -q elemental-network", 0, "the files under /oem (the applicator's name has appeared)"},
	{"state", "nodereg.service", "'finish'*|'ready (finish'*", "", 0, "the state file"},
	{"update", "nodereg-update.service", "'apply: started'*", "", 0, "a live change's keyfiles, on the update timer's run"},
}

// b8Selected says whether point:mode runs: VMLAB_B8_POINTS lists them
// ("keyfiles:ephemeral oem:kept"); unset, all run.
func b8Selected(point, mode string) bool {
	sel := strings.Fields(os.Getenv("VMLAB_B8_POINTS"))
	if len(sel) == 0 {
		return true
	}
	for _, s := range sel {
		if s == point+":"+mode {
			return true
		}
	}
	return false
}

func TestB8PowerCut(t *testing.T) {
	idx := 5
	for _, mode := range []string{"ephemeral", "kept"} {
		for _, p := range cutPoints {
			idx++
			if !b8Selected(p.name, mode) {
				continue
			}
			p, mode, idx := p, mode, idx
			t.Run(p.name+"-"+mode, func(t *testing.T) {
				runCase(t, func(t *testing.T) { powerCut(t, p, mode, idx) })
			})
		}
	}
}

// armCut starts the guest-side watcher of unit's STATUS=; it returns the
// serial log's length, after which its marker will be.
func (m *machine) armCut(p cutPoint) (int64, error) {
	st, err := os.Stat(m.serials[len(m.serials)-1])
	if err != nil {
		return 0, err
	}
	// Polls systemd's StatusText locally every 50 ms, bounded (6000 x 50 ms),
	// and marks the serial console once it matches; a run that ended
	// before (the unit failed, or became active without matching) is
	// marked MISSED.
	also := p.also
	if also == "" {
		also = "true"
	}
	script := fmt.Sprintf(`i=0; while [ $i -lt 6000 ]; do s=$(systemctl show -P StatusText %[1]s); case "$s" in %[2]s) if %[3]s; then echo "vmlab-cut-marker: $s" >/dev/ttyS0; exit 0; fi;; esac; case $(systemctl show -P ActiveState %[1]s) in failed) echo "vmlab-cut-marker: MISSED $s" >/dev/ttyS0; exit 0;; esac; i=$((i+1)); sleep 0.05; done`, p.unit, p.status, also)
	return st.Size(), m.qga.fire(script)
}

// waitMarker polls the serial log for the watcher's marker (every 20 ms,
// bounded) and returns the status it saw.
func (m *machine) waitMarker(from int64, bound time.Duration) (string, error) {
	end := time.Now().Add(bound)
	for time.Now().Before(end) {
		b, err := os.ReadFile(m.serials[len(m.serials)-1])
		if err == nil && int64(len(b)) > from {
			tail := string(b[from:])
			if i := strings.Index(tail, "vmlab-cut-marker: "); i >= 0 {
				if j := strings.IndexAny(tail[i:], "\r\n"); j > 0 {
					return strings.TrimSpace(tail[i+len("vmlab-cut-marker: ") : i+j]), nil
				}
			}
		}
		if m.qemu.ProcessState != nil {
			return "", fmt.Errorf("QEMU exited before the cut point")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("gave up after %s waiting for the cut point's STATUS in %s", bound, m.serials[len(m.serials)-1])
}

// cut kills QEMU (the power goes; nothing is synced or shut down) and then
// swtpm, which keeps the machine's TPM state.
func (m *machine) cut() {
	_ = m.qemu.Process.Kill()
	_ = m.qemu.Wait()
	stopProc(m.swtpm, 10*time.Second)
}

// serverView is what regserver holds of the machine: its inventories (by
// the machine's UUID) and their claims.
func (l *lab) serverView(m *machine) ([]inventory, error) {
	b, err := l.admin(http.MethodGet, "/admin/inventories")
	if err != nil {
		return nil, err
	}
	var all, mine []inventory
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for _, inv := range all {
		if strings.Contains(strings.ToLower(inv.Name), m.uuid) {
			mine = append(mine, inv)
		}
	}
	return mine, nil
}

func powerCut(t *testing.T, p cutPoint, mode string, idx int) {
	l := theLab
	name := fmt.Sprintf("p%d", idx)
	m, err := l.newMachine(name, idx, 1, map[string]string{
		"registration/config.yaml": nodeConfig(regCut, macOf(idx, 0), fmt.Sprintf("10.231.0.%d", 30+idx)),
	})
	if err != nil {
		fail(t, nil, "machine "+name, err)
	}
	m.keepEtc = mode == "kept"
	t.Cleanup(func() {
		if t.Failed() {
			m.saveLogs("failed")
		}
		_ = m.poweroff()
	})
	if err := m.start("active"); err != nil {
		fail(t, m, "power on", err)
	}
	var old string
	var from int64
	if p.unit == "nodereg-update.service" {
		old = updateToCut(t, m)
		from, err = m.armCut(p)
	} else {
		// Armed as soon as the guest agent answers: the agent reaches
		// apply some seconds later; the layout is checked after.
		err = m.waitAgent()
		if err == nil {
			from, err = m.armCut(p)
		}
		if err == nil {
			err = m.checkLayout()
		}
	}
	if err != nil {
		fail(t, m, "first boot", err)
	}
	unitStart := time.Now()
	if old != "" {
		if _, err := m.must("systemctl start --no-block nodereg-update.service"); err != nil {
			fail(t, m, "nodereg-update.service", err)
		}
	}
	seen, err := m.waitMarker(from, unitBound)
	if err == nil && strings.HasPrefix(seen, "MISSED") {
		err = fmt.Errorf("the run ended before the cut point %s: %s", p.status, seen)
	}
	if err != nil {
		fail(t, m, "cut point", err)
	}
	// The delay is the cut point itself, not a wait for a state.
	<-time.After(p.delay)
	m.cut()
	at := time.Since(unitStart)
	before, _ := l.serverView(m)
	cond := ""
	if p.also != "" {
		cond = " and `" + p.also + "`"
	}
	fmt.Printf("vmlab: B8 %s/%s: cut during %s: STATUS %q%s + %s (%.1fs after the watcher was armed); the server held %d inventories of the machine\n",
		p.name, mode, p.what, seen, cond, p.delay, at.Seconds(), len(before))
	converge(t, m, p, mode, before, old)
}

// updateToCut boots the machine uncut, then serves it a changed template;
// it returns the address the first boot applied.
func updateToCut(t *testing.T, m *machine) string {
	l := theLab
	if err := m.waitUp(); err != nil {
		fail(t, m, "first boot", err)
	}
	if kv, err := m.waitUnitRun("nodereg.service", 0); err != nil || kv["ExecMainStatus"] != "0" {
		fail(t, m, "nodereg.service's first run", fmt.Errorf("want exit 0: %v %v", kv, err))
	}
	inv, err := l.serverView(m)
	if err != nil || len(inv) != 1 || inv[0].claim("inventory-ip") == "" {
		fail(t, m, "regserver inventory", fmt.Errorf("want one inventory with inventory-ip: %+v %v", inv, err))
	}
	old := inv[0].claim("inventory-ip")
	l.stopServer()
	if err := l.startServer(serverConfig(templates{cut: "changed"})); err != nil {
		fail(t, m, "regserver with the changed template", err)
	}
	t.Cleanup(func() {
		l.stopServer()
		if err := l.startServer(serverConfig(templates{})); err != nil {
			t.Errorf("restarting regserver: %v", err)
		}
	})
	return old
}

// converge powers the machine on again after the cut, with the same disks
// and TPM, and checks that it converged without a person.
func converge(t *testing.T, m *machine, p cutPoint, mode string, before []inventory, old string) {
	l := theLab
	if err := m.start("active"); err != nil {
		fail(t, m, "power on after the cut", err)
	}
	if err := m.waitUp(); err != nil {
		fail(t, m, "boot after the cut", err)
	}
	var kv map[string]string
	err := waitFor("nodereg.service to converge (active, exit 0) after the cut", unitBound, func() (bool, string) {
		var err error
		kv, err = m.unit("nodereg.service", "ActiveState", "Result", "ExecMainStatus", "NRestarts", "StatusText")
		// failed: an exit the unit does not restart on (78, needs a person).
		return err == nil && (kv["ActiveState"] == "active" && kv["ExecMainStatus"] == "0" || kv["ActiveState"] == "failed"), fmt.Sprint(kv, err)
	})
	if err == nil && kv["ActiveState"] != "active" {
		out, _ := m.must("journalctl -b --no-pager -o cat -u nodereg.service | tail -5")
		err = fmt.Errorf("nodereg.service %s, exit %s, %q; its last lines:\n%s", kv["ActiveState"], kv["ExecMainStatus"], kv["StatusText"], out)
	}
	if err != nil {
		fail(t, m, "convergence", err)
	}
	inv, err := l.serverView(m)
	if err != nil || len(inv) != 1 {
		fail(t, m, "registered", fmt.Errorf("want one inventory of the machine on the server, got %d: %+v %v", len(inv), inv, err))
	}
	addr := inv[0].claim("inventory-ip")
	if n := len(inv[0].Claims); addr == "" || (old == "" && n != 1) {
		fail(t, m, "claims", fmt.Errorf("want one claim inventory-ip (the machine's one address): %+v", inv[0].Claims))
	}
	if len(before) == 1 && before[0].claim("inventory-ip") != "" && before[0].claim("inventory-ip") != addr {
		fail(t, m, "claim", fmt.Errorf("the claim moved from %s (at the cut) to %s", before[0].claim("inventory-ip"), addr))
	}
	if old != "" && addr != old {
		fail(t, m, "claim", fmt.Errorf("the live change moved the address from %s to %s", old, addr))
	}
	if err := m.waitAddr("eth0", addr+"/24"); err != nil {
		fail(t, m, "address", err)
	}
	if err := l.pingFromHost(addr, 60*time.Second); err != nil {
		fail(t, m, "ping", err)
	}
	if err := m.oemWhole(); err != nil {
		fail(t, m, "/oem", err)
	}
	r, err := m.run("/usr/sbin/nodereg-agent verify")
	if err != nil || r.Code != 0 {
		fail(t, m, "agent verify", fmt.Errorf("want exit 0: %v %v", r, err))
	}
	outcome, _ := m.must("journalctl -b --no-pager -o cat -u nodereg.service _PID=$(systemctl show -P ExecMainPID nodereg.service) | tail -1")
	// The runs that ended before the one that converged, by systemd's
	// words, with the agent's last line before each.
	earlier, _ := m.must("journalctl -b --no-pager -o cat -u nodereg.service | grep -B1 'Main process exited' | grep -v '^--' | tr '\\n' ' '")
	fmt.Printf("vmlab: B8 %s/%s: next boot: nodereg.service exit 0 after %s restarts (%s), %s on eth0 (the claim %s), agent verify exit 0; the agent said %q\n",
		p.name, mode, kv["NRestarts"], strings.TrimSpace(earlier), addr, map[bool]string{true: "kept", false: "made then"}[len(before) == 1], strings.TrimSpace(outcome))
}

// oemWhole: every file under /oem is non-empty and parses (YAML, JSON
// being YAML too).
func (m *machine) oemWhole() error {
	out, err := m.must("cd /oem && find . -path ./lost+found -prune -o -type f -print | LC_ALL=C sort")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(out) {
		body, err := m.must("cat '/oem/" + strings.TrimPrefix(f, "./") + "'")
		if err != nil {
			return err
		}
		var v any
		if strings.TrimSpace(body) == "" {
			return fmt.Errorf("/oem/%s is empty", strings.TrimPrefix(f, "./"))
		}
		if err := yaml.Unmarshal([]byte(body), &v); err != nil {
			return fmt.Errorf("/oem/%s does not parse: %v", strings.TrimPrefix(f, "./"), err)
		}
	}
	return nil
}
