//go:build vmlab

package vm

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// B6 -> B5 share machine c: dual-stack first boot, then the live changes.
var (
	machC   *machine
	machCV4 string
	machCV6 string
)

// bootMachine powers on a new machine for registration reg and waits for
// nodereg.service's first run to succeed.
func bootMachine(t *testing.T, name string, idx, nics int, reg, bootIP string) (*machine, time.Duration, int) {
	l := theLab
	m, err := l.newMachine(name, idx, nics, map[string]string{
		"registration/config.yaml": nodeConfig(reg, macOf(idx, 0), bootIP),
	})
	if err != nil {
		fail(t, nil, "machine "+name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			m.saveLogs("failed")
			_ = m.poweroff()
		}
	})
	kv, seen, tpmCmds := m.firstBoot(t)
	if kv["ActiveState"] != "active" || kv["Result"] != "success" || kv["ExecMainStatus"] != "0" {
		fail(t, m, "nodereg.service", fmt.Errorf("want active, success, exit 0; got %v", kv))
	}
	return m, seen, tpmCmds
}

func TestB6DualStack(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l := theLab
		m, seen, tpmCmds := bootMachine(t, "c", 3, 1, regDS, "10.231.0.23")
		inv, err := l.inventoryOf(regDS)
		if err != nil {
			fail(t, m, "regserver inventory", err)
		}
		v4, v6 := inv.claim("ds-ip"), inv.claim("ds-ip6")
		if v4 == "" || v6 == "" || !strings.Contains(v6, ":") {
			fail(t, m, "regserver inventory", fmt.Errorf("want an IPv4 and an IPv6 claim: %+v", inv))
		}
		if err := m.waitAddr("eth0", v6+"/64"); err != nil {
			fail(t, m, "IPv6 pool address", err)
		}
		got4, err4 := m.addrs("-4", "eth0")
		got6, err6 := m.addrs("-6", "eth0")
		if err4 != nil || err6 != nil || len(got4) != 1 || got4[0] != v4+"/24" || len(got6) != 1 || got6[0] != v6+"/64" {
			fail(t, m, "eth0", fmt.Errorf("want exactly %s/24 and %s/64; got %v %v (%v %v)", v4, v6, got4, got6, err4, err6))
		}
		if out, err := m.must("ip -6 route show default; ip -4 route show default"); err != nil ||
			!strings.Contains(out, "via 2001:db8:1::1 dev eth0") || !strings.Contains(out, "via 10.231.0.1 dev eth0") {
			fail(t, m, "routes", fmt.Errorf("want both default routes over eth0: %q %v", out, err))
		}
		for _, a := range []string{v4, v6} {
			if err := l.pingFromHost(a, 60*time.Second); err != nil {
				fail(t, m, "ping", err)
			}
		}
		if err := m.noMinuteLost(); err != nil {
			fail(t, m, "first boot", err)
		}
		machC, machCV4, machCV6 = m, v4, v6
		fmt.Println(m.timeline("B6 cold first boot, dual-stack", "eth0", v6+"/64", seen, tpmCmds))
		if !selected("B5") {
			_ = m.poweroff()
		}
	})
}

// runUpdate starts nodereg-update.service (as its timer would) and waits
// for the run to end; it returns the unit's properties.
func runUpdate(t *testing.T, m *machine) map[string]string {
	before, err := m.unit("nodereg-update.service", "ExecMainExitTimestampMonotonic")
	if err != nil {
		fail(t, m, "nodereg-update.service", err)
	}
	if _, err := m.must("systemctl start --no-block nodereg-update.service"); err != nil {
		fail(t, m, "nodereg-update.service", err)
	}
	kv, err := m.waitUnitRun("nodereg-update.service", usec(before["ExecMainExitTimestampMonotonic"]))
	if err != nil {
		fail(t, m, "nodereg-update.service", err)
	}
	return kv
}

func TestB5LiveChangeRollback(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l, m := theLab, machC
		if m == nil {
			t.Fatal("B5 needs B6's machine, which B6 did not leave")
		}
		t.Cleanup(func() {
			_ = m.poweroff()
			l.stopServer()
			if err := l.startServer(serverConfig(templates{})); err != nil {
				t.Errorf("restarting regserver: %v", err)
			}
		})
		// 1. The template gains a second IPv4 address: applied live.
		l.stopServer()
		if err := l.startServer(serverConfig(templates{ds: "changed"})); err != nil {
			fail(t, m, "regserver with the changed template", err)
		}
		kv := runUpdate(t, m)
		applyTook := usec(kv["ExecMainExitTimestampMonotonic"]) - usec(kv["ExecMainStartTimestampMonotonic"])
		if kv["ExecMainStatus"] != "0" {
			fail(t, m, "update with the changed template", fmt.Errorf("want exit 0: %v", kv))
		}
		inv, err := l.inventoryOf(regDS)
		if err != nil {
			fail(t, m, "regserver inventory", err)
		}
		extra := inv.claim("extra-ip")
		if extra == "" || inv.claim("ds-ip") != machCV4 {
			fail(t, m, "regserver inventory", fmt.Errorf("want ds-ip %s kept and extra-ip claimed: %+v", machCV4, inv))
		}
		got4, err := m.addrs("-4", "eth0")
		if err != nil || len(got4) != 2 || !contains(got4, machCV4+"/24") || !contains(got4, extra+"/24") {
			fail(t, m, "eth0 after the change", fmt.Errorf("want %s/24 and %s/24; got %v %v", machCV4, extra, got4, err))
		}
		if out, err := m.must("cat /oem/elemental-network.yaml"); err != nil || !strings.Contains(out, extra+"/24") {
			fail(t, m, "applicator", fmt.Errorf("the persisted applicator lacks %s: %v", extra, err))
		}
		if err := l.pingFromHost(extra, 60*time.Second); err != nil {
			fail(t, m, "ping the new address", err)
		}
		// The state file is left out: a rolled-back config is kept in it
		// (docs/annotations.md), so the next connection reports it.
		applied, err := m.oemDigestBut("registration/state.yaml")
		if err != nil {
			fail(t, m, "/oem", err)
		}
		appliedDigest, err := m.stateKey("nodereg-network-digest")
		if err != nil || appliedDigest == "" {
			fail(t, m, "state file", fmt.Errorf("no nodereg-network-digest after the apply (%v)", err))
		}
		// 2. A template that cuts the node off the server: rolled back.
		l.stopServer()
		if err := l.startServer(serverConfig(templates{ds: "cutoff"})); err != nil {
			fail(t, m, "regserver with the cut-off template", err)
		}
		kv = runUpdate(t, m)
		if kv["ExecMainStatus"] != "75" {
			fail(t, m, "update with the cut-off template", fmt.Errorf("want exit 75 (rolled back): %v", kv))
		}
		if _, line, err := m.journalFirst("-u nodereg-update.service", `(?i)roll(ed)? ?back`); err != nil || line == "" {
			fail(t, m, "rollback", fmt.Errorf("the agent's log does not say it rolled back (%v)", err))
		}
		got4, err = m.addrs("-4", "eth0")
		if err != nil || len(got4) != 2 || !contains(got4, machCV4+"/24") || !contains(got4, extra+"/24") {
			fail(t, m, "eth0 after the rollback", fmt.Errorf("want %s/24 and %s/24 back; got %v %v", machCV4, extra, got4, err))
		}
		if d, err := m.oemDigestBut("registration/state.yaml"); err != nil || d != applied {
			fail(t, m, "/oem after the rollback", fmt.Errorf("changed:\nbefore\n%s\nafter\n%s(%v)", applied, d, err))
		}
		// The state file still names the old config as applied and keeps
		// the rollback for the report.
		if d, err := m.stateKey("nodereg-network-digest"); err != nil || d != appliedDigest {
			fail(t, m, "state file after the rollback", fmt.Errorf("nodereg-network-digest %q, want %q kept (%v)", d, appliedDigest, err))
		}
		if k, err := m.stateKey("nodereg-network-error-kind"); err != nil || k != "rolled-back" {
			fail(t, m, "state file after the rollback", fmt.Errorf("nodereg-network-error-kind %q, want rolled-back (%v)", k, err))
		}
		for _, a := range []string{machCV4, machCV6} {
			if err := l.pingFromHost(a, 60*time.Second); err != nil {
				fail(t, m, "ping after the rollback", err)
			}
		}
		fmt.Printf("vmlab: timeline B5: nodereg-update.service applying the changed template %.1fs; rolling the cut-off one back %.1fs (reachability window 15 s)\n",
			applyTook, usec(kv["ExecMainExitTimestampMonotonic"])-usec(kv["ExecMainStartTimestampMonotonic"]))
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
