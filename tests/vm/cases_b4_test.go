//go:build vmlab

package vm

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The VLAN's far end: the host cannot terminate VLANs (no 8021q), so the
// guest's third NIC goes into a namespace of the guest's own with eth2.42,
// and tagged frames cross the host's plain bridge between them.
const (
	peerNS   = "vlanpeer"
	peerAddr = "10.42.0.1"
)

func setupPeer(m *machine) error {
	_, err := m.must("ip netns del " + peerNS + " 2>/dev/null; ip netns add " + peerNS +
		" && ip link set eth2 netns " + peerNS +
		" && ip -n " + peerNS + " link set eth2 up" +
		" && ip -n " + peerNS + " link add link eth2 name eth2.42 type vlan id 42" +
		" && ip -n " + peerNS + " addr add " + peerAddr + "/24 dev eth2.42" +
		" && ip -n " + peerNS + " link set eth2.42 up")
	return err
}

// pingFromPeer pings addr over VLAN 42 from the guest's peer namespace.
func pingFromPeer(m *machine, addr string) error {
	return waitFor("ping "+addr+" over VLAN 42 from the peer namespace", 90*time.Second, func() (bool, string) {
		r, err := m.run("ip netns exec " + peerNS + " ping -c 1 -W 2 " + addr)
		return err == nil && r.Code == 0, fmt.Sprint(r, err)
	})
}

var activeRe = regexp.MustCompile(`Currently Active Slave: (\S+)`)

// bondState checks bond0 is active-backup over eth0 and eth1 and returns
// the active port.
func bondState(m *machine) (string, error) {
	out, err := m.must("cat /proc/net/bonding/bond0")
	if err != nil {
		return "", err
	}
	if !strings.Contains(out, "Bonding Mode: fault-tolerance (active-backup)") ||
		!strings.Contains(out, "Slave Interface: eth0") || !strings.Contains(out, "Slave Interface: eth1") {
		return "", fmt.Errorf("want an active-backup bond of eth0 and eth1:\n%s", out)
	}
	a := activeRe.FindStringSubmatch(out)
	if a == nil {
		return "", fmt.Errorf("no active port:\n%s", out)
	}
	return a[1], nil
}

// checkBond checks the bond, the VLAN and both addresses, and that the VLAN
// address answers from the peer.
func checkBond(t *testing.T, m *machine, mgmt, vlan string) {
	if err := m.waitAddr("bond0.42", vlan+"/24"); err != nil {
		fail(t, m, "VLAN address", err)
	}
	if got, err := m.addrs("-4", "bond0"); err != nil || len(got) != 1 || got[0] != mgmt+"/24" {
		fail(t, m, "bond0", fmt.Errorf("want %s/24; got %v %v", mgmt, got, err))
	}
	for _, nic := range []string{"eth0", "eth1"} {
		if got, err := m.addrs("-4", nic); err != nil || len(got) != 0 {
			fail(t, m, nic, fmt.Errorf("a bond port carries no address; got %v %v", got, err))
		}
	}
	if out, err := m.must("cat /proc/net/vlan/bond0.42"); err != nil || !strings.Contains(out, "VID: 42") {
		fail(t, m, "VLAN", fmt.Errorf("bond0.42 is not VLAN 42 over the bond: %q %v", out, err))
	}
	if _, err := bondState(m); err != nil {
		fail(t, m, "bond", err)
	}
	if err := setupPeer(m); err != nil {
		fail(t, m, "VLAN peer", err)
	}
	if err := pingFromPeer(m, vlan); err != nil {
		fail(t, m, "VLAN reachability", err)
	}
	if err := theLab.pingFromHost(mgmt, 60*time.Second); err != nil {
		fail(t, m, "bond reachability", err)
	}
}

func TestB4BondVLAN(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l := theLab
		m, seen, tpmCmds := bootMachine(t, "b", 2, 3, regBond, "10.231.0.22")
		t.Cleanup(func() { _ = m.poweroff() })
		inv, err := l.inventoryOf(regBond)
		if err != nil {
			fail(t, m, "regserver inventory", err)
		}
		mgmt, vlan := inv.claim("mgmt-ip"), inv.claim("vlan-ip")
		if mgmt == "" || vlan == "" {
			fail(t, m, "regserver inventory", fmt.Errorf("want claims mgmt-ip and vlan-ip: %+v", inv))
		}
		if out, err := m.must("command -v nmstatectl || echo none"); err != nil || strings.TrimSpace(out) != "none" {
			fail(t, m, "image", fmt.Errorf("nmstatectl in the guest: %q", out))
		}
		// Applied live at the first boot.
		checkBond(t, m, mgmt, vlan)
		fmt.Println(m.timeline("B4 cold first boot, bond + VLAN applied live", "bond0.42", vlan+"/24", seen, tpmCmds))

		// Failover: cut the active port's link from QEMU's monitor.
		active, err := bondState(m)
		if err != nil {
			fail(t, m, "bond", err)
		}
		netdev := map[string]string{"eth0": "n0", "eth1": "n1"}[active]
		if netdev == "" {
			fail(t, m, "bond", fmt.Errorf("active port %q is not eth0 or eth1", active))
		}
		if err := qmpCommand(m.qmp, "set_link", map[string]any{"name": netdev, "up": false}); err != nil {
			fail(t, m, "set_link off", err)
		}
		err = waitFor("the bond to fail over from "+active, 60*time.Second, func() (bool, string) {
			now, err := bondState(m)
			return err == nil && now != active, fmt.Sprint(now, err)
		})
		if err != nil {
			fail(t, m, "failover", err)
		}
		if err := pingFromPeer(m, vlan); err != nil {
			fail(t, m, "VLAN after failover", err)
		}
		if err := qmpCommand(m.qmp, "set_link", map[string]any{"name": netdev, "up": true}); err != nil {
			fail(t, m, "set_link on", err)
		}

		// After a reboot the bond and VLAN come from /oem, before the agent.
		if err := m.reboot(); err != nil {
			fail(t, m, "reboot", err)
		}
		kv, err := m.waitUnitRun("nodereg.service", 0)
		if err != nil || kv["ExecMainStatus"] != "0" {
			fail(t, m, "nodereg.service after the reboot", fmt.Errorf("want exit 0: %v %v", kv, err))
		}
		warmSeen, warmTPM := time.Since(m.powerOn), m.tpmCommands()
		kf, err := m.checkKeyfilesFromYip()
		if err != nil {
			fail(t, m, "keyfiles after the reboot", err)
		}
		fmt.Printf("vmlab: B4: NetworkManager loaded %v, written by this boot's initramfs stage\n", kf)
		checkBond(t, m, mgmt, vlan)
		// The bond and the VLAN came from /oem through yip (the keyfile
		// check above): the warm boot waited for no DHCP on the unclaimed
		// third NIC, which NetworkManager still tries.
		if err := m.noMinuteLost(); err != nil {
			fail(t, m, "warm reboot", err)
		}
		fmt.Println(m.timeline("B4 warm reboot, bond + VLAN from /oem", "bond0.42", vlan+"/24", warmSeen, warmTPM))
	})
}
