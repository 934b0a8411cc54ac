//go:build vmlab

package vm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// B1 -> B2 -> B3 are one machine's life: first boot, reboot with the server
// down, recovery boot. Each case fails (never skips) when the one before it
// left no machine.
var (
	machA     *machine
	machAAddr string // pool address B1 got
	machAOEM  string // /oem checksums after B1
)

const bootIPA = "10.231.0.21"

func TestB1FirstBootNoDHCP(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l := theLab
		m, err := l.newMachine("a", 1, 1, map[string]string{
			"registration/config.yaml": nodeConfig(regA, macOf(1, 0), bootIPA),
		})
		if err != nil {
			fail(t, nil, "machine a", err)
		}
		kv, seen, tpmCmds := m.firstBoot(t)
		// Type=notify with RemainAfterExit: the unit is active only after
		// READY=1, and it became active before the agent exited.
		if kv["Type"] != "notify" || kv["ActiveState"] != "active" || kv["SubState"] != "exited" ||
			kv["Result"] != "success" || kv["ExecMainStatus"] != "0" {
			fail(t, m, "nodereg.service", fmt.Errorf("want notify, active/exited, success, exit 0; got %v", kv))
		}
		if r, e := usec(kv["ActiveEnterTimestampMonotonic"]), usec(kv["ExecMainExitTimestampMonotonic"]); r <= 0 || r > e {
			fail(t, m, "READY=1", fmt.Errorf("active at %.3fs, agent exited at %.3fs: READY=1 was not sent while it ran", r, e))
		}
		inv, err := l.inventoryOf(regA)
		if err != nil {
			fail(t, m, "regserver inventory", err)
		}
		addr := inv.claim("inventory-ip")
		if addr == "" || inv.AuthKind != "tpm" {
			fail(t, m, "regserver inventory", fmt.Errorf("want a TPM inventory with claim inventory-ip; got %+v", inv))
		}
		got, err := m.addrs("-4", "eth0")
		if err != nil || len(got) != 1 || got[0] != addr+"/24" {
			fail(t, m, "eth0", fmt.Errorf("want only the pool address %s/24 (bootstrap %s dropped); got %v %v", addr, bootIPA, got, err))
		}
		hash, err := m.journalField("nodereg.service", "TPM_HASH")
		if err != nil || hash == "" || hash != inv.Hash {
			fail(t, m, "TPM hash", fmt.Errorf("journal TPM_HASH %q, regserver's inventory hash %q (%v)", hash, inv.Hash, err))
		}
		// The agent went through the kernel's resource manager: the keys it
		// made persistent are in the vTPM.
		if out, err := m.must("test -c /dev/tpmrm0 && tpm2_getcap handles-persistent"); err != nil || !strings.Contains(out, "0x81") {
			fail(t, m, "vTPM", fmt.Errorf("no persistent handle in the vTPM after registration: %q %v", out, err))
		}
		// No DHCP: the agent's own bootstrap address came first, then the
		// pool address (the lab's address monitor saw both).
		bt, err := m.addrTime("eth0", bootIPA+"/24")
		pt, err2 := m.addrTime("eth0", addr+"/24")
		if err != nil || err2 != nil || bt <= 0 || pt <= bt {
			fail(t, m, "bootstrap", fmt.Errorf("bootstrap address %s at %.2fs, pool address at %.2fs: want the bootstrap first (%v %v)", bootIPA, bt, pt, err, err2))
		}
		if err := l.pingFromHost(addr, 60*time.Second); err != nil {
			fail(t, m, "ping", err)
		}
		if err := m.noMinuteLost(); err != nil {
			fail(t, m, "first boot", err)
		}
		if machAOEM, err = m.oemDigest(); err != nil {
			fail(t, m, "/oem", err)
		}
		if !strings.Contains(machAOEM, "./elemental-network.yaml") || !strings.Contains(machAOEM, "./registration/state.yaml") {
			fail(t, m, "/oem", fmt.Errorf("want the applicator and the state under /oem; got\n%s", machAOEM))
		}
		machA, machAAddr = m, addr
		fmt.Println(m.timeline("B1 cold first boot", "eth0", addr+"/24", seen, tpmCmds))
		if !selected("B2") && !selected("B3") {
			_ = m.poweroff()
		}
	})
}

func TestB2RebootServerDown(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l, m := theLab, machA
		if m == nil {
			t.Fatal("B2 needs B1's machine, which B1 did not leave")
		}
		l.stopServer()
		t.Cleanup(func() {
			if err := l.startServer(serverConfig(templates{})); err != nil {
				t.Errorf("restarting regserver: %v", err)
			}
		})
		if err := m.reboot(); err != nil {
			fail(t, m, "reboot", err)
		}
		cidr := machAAddr + "/24"
		if err := m.waitAddr("eth0", cidr); err != nil {
			fail(t, m, "address after reboot", err)
		}
		seen := time.Since(m.powerOn)
		kf, err := m.checkKeyfilesFromYip()
		if err != nil {
			fail(t, m, "keyfiles after the reboot", err)
		}
		fmt.Printf("vmlab: B2: NetworkManager loaded %v, written by this boot's initramfs stage\n", kf)
		// The unit ends with the retry exit code (and systemd restarts it).
		err = waitFor("nodereg.service to exit 75 with regserver down", unitBound, func() (bool, string) {
			_, line, err := m.journalFirst("-u nodereg.service", `status=75/TEMPFAIL`)
			return err == nil && line != "", fmt.Sprint(err)
		})
		if err != nil {
			fail(t, m, "nodereg.service", err)
		}
		tpmCmds := m.tpmCommands()
		// The address came from /oem through yip (the keyfile check above),
		// not from the agent: nodereg.service, ordered after NetworkManager
		// only, may start before or after it is up, and never applied.
		if out, err := m.must("journalctl -b --no-pager -o json -u nodereg.service | grep -c '\"PHASE\":\"apply\"' || true"); err != nil || strings.TrimSpace(out) != "0" {
			fail(t, m, "nodereg.service", fmt.Errorf("the agent's apply phase ran with the server down: %q lines %v", out, err))
		}
		if d, err := m.oemDigest(); err != nil || d != machAOEM {
			fail(t, m, "/oem", fmt.Errorf("changed by a failed run:\nbefore\n%s\nafter\n%s(%v)", machAOEM, d, err))
		}
		if err := l.pingFromHost(machAAddr, 60*time.Second); err != nil {
			fail(t, m, "ping", err)
		}
		fmt.Println(m.timeline("B2 warm reboot, server down (agent exits 75)", "eth0", cidr, seen, tpmCmds))
		if !selected("B3") {
			_ = m.poweroff()
		}
	})
}

func TestB3Recovery(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l, m := theLab, machA
		if m == nil {
			t.Fatal("B3 needs B1's machine, which B1 did not leave")
		}
		// The machine's life ends here, also when a check fails.
		t.Cleanup(func() { _ = m.poweroff() })
		if err := m.poweroff(); err != nil {
			fail(t, m, "poweroff", err)
		}
		// The recovery system: the same image without the active system's
		// state (a fresh root), the same /oem and TPM.
		if err := m.newRoot("root-recovery.qcow2"); err != nil {
			fail(t, m, "recovery root", err)
		}
		if err := m.start("recovery"); err != nil {
			fail(t, m, "power on", err)
		}
		if err := m.waitUp(); err != nil {
			fail(t, m, "recovery boot", err)
		}
		if out, err := m.must("cat /run/elemental/recovery_mode; ls /run/elemental"); err != nil || strings.Contains(out, "active_mode") {
			fail(t, m, "sentinels", fmt.Errorf("want recovery_mode only: %q %v", out, err))
		}
		cidr := machAAddr + "/24"
		if err := m.waitAddr("eth0", cidr); err != nil {
			fail(t, m, "address in recovery", err)
		}
		seen, tpmCmds := time.Since(m.powerOn), m.tpmCommands()
		kf, err := m.checkKeyfilesFromYip()
		if err != nil {
			fail(t, m, "keyfiles in recovery", err)
		}
		fmt.Printf("vmlab: B3: NetworkManager loaded %v, written by this boot's initramfs stage\n", kf)
		if kv, err := m.unit("nodereg.service", "ConditionResult", "ExecMainStartTimestampMonotonic"); err != nil ||
			kv["ConditionResult"] != "no" || kv["ExecMainStartTimestampMonotonic"] != "0" {
			fail(t, m, "nodereg.service in recovery", fmt.Errorf("want skipped by its condition: %v %v", kv, err))
		}
		if err := l.pingFromHost(machAAddr, 60*time.Second); err != nil {
			fail(t, m, "ping", err)
		}
		fmt.Println(m.timeline("B3 recovery boot (agent does not run)", "eth0", cidr, seen, tpmCmds))
		resetNetwork(t, m)
	})
}

// foreignKeyfile is a profile the agent did not write; --reset-network must
// leave it, loaded.
const foreignKeyfile = `[connection]
id=foreign-dummy
type=dummy
interface-name=dummy7
[ipv4]
method=manual
address1=192.0.2.7/32
[ipv6]
method=disabled
`

// resetNetwork runs --reset-network as the reset plan runs it (the
// elemental-register name) and checks that only the agent's files went.
func resetNetwork(t *testing.T, m *machine) {
	kdir := "/etc/NetworkManager/system-connections"
	if _, err := m.must("printf '%s' '" + foreignKeyfile + "' > " + kdir + "/foreign.nmconnection && chmod 600 " + kdir + "/foreign.nmconnection && nmcli connection reload"); err != nil {
		fail(t, m, "foreign keyfile", err)
	}
	before, err := m.must("ls " + kdir + "; ls -R /oem")
	if err != nil || !strings.Contains(before, "eth0.nmconnection") {
		fail(t, m, "before reset-network", fmt.Errorf("want eth0.nmconnection: %q %v", before, err))
	}
	keep := "sha256sum /oem/registration/config.yaml " + kdir + "/foreign.nmconnection"
	kept, err := m.must(keep)
	if err != nil {
		fail(t, m, "before reset-network", err)
	}
	stateBefore, err := m.must("cat /oem/registration/state.yaml")
	if err != nil {
		fail(t, m, "before reset-network", err)
	}
	r, err := m.run("/usr/sbin/elemental-register --reset-network")
	if err != nil || r.Code != 0 {
		fail(t, m, "--reset-network", fmt.Errorf("%v %v", r, err))
	}
	after, err := m.must("ls " + kdir + "; ls -R /oem")
	if err != nil {
		fail(t, m, "after reset-network", err)
	}
	for _, gone := range []string{"eth0.nmconnection", "elemental-network.yaml", "network-manifest", "network-config.nmstate"} {
		if strings.Contains(after, gone) {
			fail(t, m, "--reset-network", fmt.Errorf("%s still there:\n%s\n(agent said %s)", gone, after, r))
		}
	}
	// NetworkManager lets go of the address whose profile went.
	if err := waitFor("the pool address to leave eth0 after --reset-network", 120*time.Second, func() (bool, string) {
		got, err := m.addrs("-4", "eth0")
		return err == nil && !contains(got, machAAddr+"/24"), fmt.Sprint(got, err)
	}); err != nil {
		fail(t, m, "--reset-network", err)
	}
	if k, err := m.must(keep); err != nil || k != kept {
		fail(t, m, "--reset-network", fmt.Errorf("touched a file it does not own:\nbefore %s\nafter %s %v", kept, k, err))
	}
	// The state file is the agent's too: only its network keys go (the
	// next run applies again), the registration and the AK stay.
	stateAfter, err := m.must("cat /oem/registration/state.yaml")
	if err != nil {
		fail(t, m, "after reset-network", err)
	}
	if err := sameStateButNetwork(stateBefore, stateAfter); err != nil {
		fail(t, m, "--reset-network", err)
	}
	if out, err := m.must("nmcli -t -f NAME connection show"); err != nil || !strings.Contains(out, "foreign-dummy") {
		fail(t, m, "--reset-network", fmt.Errorf("the foreign profile is no longer loaded: %q %v", out, err))
	}
	t.Logf("--reset-network: %s", r)
}

// sameStateButNetwork: before had a network digest, after has none, and
// every other key of the state file is unchanged.
func sameStateButNetwork(before, after string) error {
	var b, a map[string]any
	if err := yaml.Unmarshal([]byte(before), &b); err != nil {
		return fmt.Errorf("state before: %w", err)
	}
	if err := yaml.Unmarshal([]byte(after), &a); err != nil {
		return fmt.Errorf("state after: %w", err)
	}
	if b["nodereg-network-digest"] == nil || b["nodereg-ak"] == nil || b["initialRegistration"] == nil {
		return fmt.Errorf("state before reset lacks the registration, AK or network digest:\n%s", before)
	}
	for k := range b {
		if strings.HasPrefix(k, "nodereg-network-") {
			delete(b, k)
		}
	}
	for k := range a {
		if strings.HasPrefix(k, "nodereg-network-") {
			return fmt.Errorf("state after reset still has %s:\n%s", k, after)
		}
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("state keys other than the network ones changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	return nil
}
