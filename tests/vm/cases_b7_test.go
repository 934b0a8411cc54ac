//go:build vmlab

package vm

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The DHCP range B7's dnsmasq leases from: on the lab's segment, apart from
// every pool and bootstrap address.
const (
	dhcpFirst = "10.231.0.200"
	dhcpLast  = "10.231.0.220"
)

var dhcpAddrRe = regexp.MustCompile(`^10\.231\.0\.2(0[0-9]|1[0-9]|20)/24$`)

// startDHCP runs Debian's dnsmasq as a DHCP server on the lab's bridge,
// inside the lab's namespace only (no DNS: --port=0); the returned function
// stops it.
func (l *lab) startDHCP() (func(), string, error) {
	logFile := filepath.Join(l.runDir, "dnsmasq.log")
	argv := l.inNS("dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--user=root",
		"--interface=br0", "--bind-interfaces", "--dhcp-authoritative",
		"--dhcp-range="+dhcpFirst+","+dhcpLast+",255.255.255.0,10m",
		"--dhcp-option=option:router,"+serverIP,
		"--dhcp-leasefile="+filepath.Join(l.runDir, "dnsmasq.leases"),
		"--pid-file="+filepath.Join(l.runDir, "dnsmasq.pid"),
		"--log-dhcp", "--log-facility="+logFile)
	c := exec.Command(argv[0], argv[1:]...)
	out, err := os.OpenFile(filepath.Join(l.runDir, "dnsmasq.out"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", err
	}
	c.Stdout, c.Stderr = out, out
	err = c.Start()
	out.Close()
	if err != nil {
		return nil, "", fmt.Errorf("dnsmasq: %w", err)
	}
	l.track(c)
	err = waitFor("dnsmasq to listen for DHCP in the lab namespace", 60*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "DHCP, IP range"), string(b)
	})
	if err != nil {
		stopProc(c, 5*time.Second)
		return nil, "", err
	}
	return func() { stopProc(c, 10*time.Second) }, logFile, nil
}

// firstAddrTime is when the first address matching re appeared on dev this
// boot (the address monitor's stamp, as addrTime), and which one.
func (m *machine) firstAddrTime(dev string, re *regexp.Regexp) (string, float64, error) {
	out, err := m.must("journalctl -b --no-pager -o cat -u addrwatch.service")
	if err != nil {
		return "", -1, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		// "[stamp] 2: eth0    inet 10.231.0.201/24 ..."
		if len(f) >= 5 && f[2] == dev && f[3] == "inet" && re.MatchString(f[4]) {
			at, err := m.addrTime(dev, f[4])
			return f[4], at, err
		}
	}
	return "", -1, nil
}

func TestB7DHCP(t *testing.T) {
	runCase(t, func(t *testing.T) {
		l := theLab
		stop, dlog, err := l.startDHCP()
		if err != nil {
			fail(t, nil, "DHCP server", err)
		}
		t.Cleanup(stop)
		m, err := l.newMachine("d", 4, 1, map[string]string{"registration/config.yaml": nodeConfigDHCP(regDHCP)})
		if err != nil {
			fail(t, nil, "machine d", err)
		}
		t.Cleanup(func() { _ = m.poweroff() })
		kv, seen, tpmCmds := m.firstBoot(t)
		if kv["ActiveState"] != "active" || kv["Result"] != "success" || kv["ExecMainStatus"] != "0" {
			fail(t, m, "nodereg.service", fmt.Errorf("want active, success, exit 0; got %v", kv))
		}
		// The unit as shipped: the installed file is the repository's, and
		// systemd ordered it after NetworkManager only.
		ship, err := os.ReadFile(filepath.Join(l.repo, "systemd/nodereg.service"))
		if err != nil {
			fail(t, m, "unit", err)
		}
		if got, err := m.must("sha256sum < $(systemctl show -P FragmentPath nodereg.service)"); err != nil ||
			!strings.HasPrefix(got, fmt.Sprintf("%x", sha256.Sum256(ship))) {
			fail(t, m, "unit", fmt.Errorf("the installed nodereg.service is not the shipped one: %q %v", got, err))
		}
		// The lease came first, from dnsmasq, for this MAC.
		lease, lt, err := m.firstAddrTime("eth0", dhcpAddrRe)
		if err != nil || lease == "" {
			fail(t, m, "DHCP lease", fmt.Errorf("no address of the DHCP range on eth0 this boot (%v)", err))
		}
		if b, _ := os.ReadFile(dlog); !strings.Contains(string(b), "DHCPACK(br0) "+strings.TrimSuffix(lease, "/24")+" "+m.macs[0]) {
			fail(t, m, "DHCP lease", fmt.Errorf("dnsmasq's log has no DHCPACK of %s to %s", lease, m.macs[0]))
		}
		inv, err := l.inventoryOf(regDHCP)
		if err != nil {
			fail(t, m, "regserver inventory", err)
		}
		addr := inv.claim("inventory-ip")
		if addr == "" || inv.AuthKind != "tpm" {
			fail(t, m, "regserver inventory", fmt.Errorf("want a TPM inventory with claim inventory-ip; got %+v", inv))
		}
		if err := m.waitAddr("eth0", addr+"/24"); err != nil {
			fail(t, m, "pool address", err)
		}
		pt, err := m.addrTime("eth0", addr+"/24")
		if err != nil || pt <= lt {
			fail(t, m, "order", fmt.Errorf("lease %s at %.2fs, pool address at %.2fs: want the lease first (%v)", lease, lt, pt, err))
		}
		if err := l.pingFromHost(addr, 60*time.Second); err != nil {
			fail(t, m, "ping", err)
		}
		nm, _ := m.unit("NetworkManager.service", "ExecMainStartTimestampMonotonic")
		fmt.Printf("vmlab: B7: lease %s from dnsmasq %.1fs after NetworkManager started, pool address %s %.1fs after the lease\n",
			lease, lt-usec(nm["ExecMainStartTimestampMonotonic"]), addr, pt-lt)
		fmt.Println(m.timeline("B7 cold first boot, DHCP, no bootstrap block", "eth0", addr+"/24", seen, tpmCmds))
	})
}
