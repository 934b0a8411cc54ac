//go:build bootsim

package boot

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

// The stranding shapes (docs/apply.md, "The rollback check tests the next
// boot"): configs a live apply could bring up while the server stays
// reachable, but that the next boot brings up cut off. Whatever the agent
// makes of each, an exit 0 must mean the node reaches the server after the
// next boot; each case reboots and checks that it does.

// downKeyfileTemplate is keyfileTemplate's profile with autoconnect=false:
// the same file (so the same UUID, still active after the reload), which
// no boot brings up.
var downKeyfileTemplate = strings.Replace(keyfileTemplate, "        type=ethernet\n", "        type=ethernet\n        autoconnect=false\n", 1)

// twoProfilesTemplate keeps the working profile and adds a second one for
// the same NIC, cut off, with the [connection] line extra: a boot may
// prefer it (autoconnect-priority=100 makes it certain).
func twoProfilesTemplate(extra string) string {
	return strings.Replace(keyfileTemplate, "      inventory-ip: pool-a\n", "      inventory-ip: pool-a\n      cut-ip: pool-b\n", 1) + `      ` + nodeIf + `-cut: |
        [connection]
        id=nodereg-cut
        type=ethernet
        interface-name=` + nodeIf + `
        ` + extra + `

        [ipv4]
        method=manual
        address1={cut-ip}/24

        [ipv6]
        method=disabled
`
}

// nmstateDownTemplate sets the NIC that carries the server route to
// `state: down` (the built-in translator writes autoconnect=false).
const nmstateDownTemplate = `
    configurator: nmstate
    config:
      interfaces:
      - name: ` + nodeIf + `
        type: ethernet
        state: down
`

// reachesServer says whether a TCP connection from the node to the
// registration server's port opens.
func (l *lab) reachesServer() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := labkit.DialIn(ctx, l.nodeNS, "tcp", net.JoinHostPort(serverIP, port))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// strandCheck runs the agent on a node booted with a working config while
// the server sends a stranding shape: the run must end in wantCode with one
// of wants in its output (exit 0 is never right here: each shape cuts the
// node off at the next boot), and the next boot must reach the server.
func strandCheck(t *testing.T, m *machine, r *report, env []string, wantCode int, wants ...string) agentRun {
	t.Helper()
	res := m.runAgent(env)
	said := false
	for _, w := range wants {
		said = said || strings.Contains(res.out, w)
	}
	if res.code != wantCode || !said {
		t.Errorf("agent exit %d, want %d with one of %q in its output", res.code, wantCode, wants)
	}
	start := m.boot(active, false)
	waitFor(t, "the node reaching the server after the next boot", m.reachesServer, m.diag)
	r.boot("next boot reaches the server", time.Since(start))
	return res
}

// TestStrandAutoconnectFalse: a keyfile with autoconnect=false for the NIC
// that reaches the server. The live apply takes its connection down, as
// the boot would, so the check fails and the apply is rolled back.
func TestStrandAutoconnectFalse(t *testing.T) {
	r, m, addr := bootedNode(t, "strand: autoconnect=false rolled back")
	m.startServer(serverConfig(downKeyfileTemplate))
	start := m.boot(active, false)
	r.boot("reboot", m.waitAddr(start, cidr(addr)))
	strandCheck(t, m, r, nil, 75, "reachability check")
	if !strings.Contains(string(m.keyfile(nodeIf)), "address1="+cidr(addr)) || strings.Contains(string(m.keyfile(nodeIf)), "autoconnect=false") {
		t.Errorf("keyfile after the rollback:\n%s", m.keyfile(nodeIf))
	}
}

// TestStrandTwoProfiles: a second profile for the NIC, cut off, with a
// higher autoconnect-priority (the shape as found), and with the same
// priority (which a boot picks is then NetworkManager's choice). Refused
// when planned (one interface, one profile), nothing written.
func TestStrandTwoProfiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, extra string
		rules       []string
	}{
		// A priority above the policy's bound is refused by that rule
		// too, whichever the policy judges first.
		{"priority 100", "autoconnect-priority=100", []string{"rule one-profile-per-device", "rule bounds"}},
		{"same priority", "autoconnect=true", []string{"rule one-profile-per-device"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, m, addr := bootedNode(t, "strand: two profiles for one NIC refused, "+c.name)
			oldApplicator := m.read(applicator)
			m.startServer(serverConfig(twoProfilesTemplate(c.extra)))
			start := m.boot(active, false)
			r.boot("reboot", m.waitAddr(start, cidr(addr)))
			strandCheck(t, m, r, nil, 78, c.rules...)
			if m.exists(keyfileDir + "/" + nodeIf + "-cut.nmconnection") {
				t.Error("the refused config's second keyfile was written")
			}
			if got := m.read(applicator); string(got) != string(oldApplicator) {
				t.Errorf("the applicator changed:\n%s", got)
			}
		})
	}
}

// TestStrandNmstateDown: nmstate `state: down` on the NIC carrying the
// server route, by the built-in translator: rolled back like the keyfile.
func TestStrandNmstateDown(t *testing.T) {
	t.Parallel()
	r := newReport(t, "strand: nmstate state down rolled back")
	m := newNmstateMachine(t, nmstateServerConfig(nmstateSeedTemplate))
	addr := nmstateFirstBoot(t, m, r)
	m.startServer(nmstateServerConfig(nmstateDownTemplate))
	start := m.boot(active, false)
	r.boot("reboot", m.waitAddrOn(t, start, nodeIf, cidr(addr)))
	strandCheck(t, m.machine, r, m.env, 75, "reachability check")
	m.check(t, "boot after the rollback", seedState(addr))
}

// otherIfaceTemplate gives the node a profile for another interface only
// (a bridge without ports on pool-b: the lab's kernel may lack dummy
// support): nothing of it reaches the server.
const otherIfaceTemplate = `
    configurator: nmconnections
    ipAddresses:
      cut-ip: pool-b
    config:
      nrbr9: |
        [connection]
        id=nodereg-other
        type=bridge
        interface-name=nrbr9

        [ipv4]
        method=manual
        address1={cut-ip}/24

        [ipv6]
        method=disabled
`

// TestStrandBootstrapOtherNIC: the node registers over its bootstrap
// network (a runtime profile under /run, gone at the next boot) and the
// server's config is for another interface only. The check runs without
// the bootstrap profile, as the next boot will: it fails, the apply is
// rolled back, the bootstrap network is up again, nothing persisted.
func TestStrandBootstrapOtherNIC(t *testing.T) {
	r, m := labNode(t, "strand: config beside the bootstrap rolled back", otherIfaceTemplate)
	m.writeBootstrapConfig(staticByMAC(m.mac, "10.231.0.21")...)
	m.boot(active, false)
	res := m.runAgent([]string{fastProbe})
	if res.code != 75 || !strings.Contains(res.out, "reachability check") || !strings.Contains(res.out, "bootstrap network is up again") {
		t.Errorf("agent exit %d, want 75, the reachability check failed and the bootstrap back", res.code)
	}
	r.boot("NM start→bootstrap back", m.waitAddr(m.nmStarted, cidr("10.231.0.21")))
	waitFor(t, "the node reaching the server over the bootstrap again", m.reachesServer, m.diag)
	if m.exists(applicator) || m.exists(keyfileDir+"/nrbr9.nmconnection") {
		t.Errorf("the rolled-back config left its applicator or keyfile")
	}
}

// downTemplate is a profile of ours for the NIC with autoconnect=false.
var downTemplate = strings.Replace(strings.Replace(keyfileTemplate, "        type=ethernet\n", "        type=ethernet\n        autoconnect=false\n", 1),
	"id="+profile+"\n", "id="+profile+"-off\n", 1)

// TestStrandDownBesideOtherProfile: the NIC is up on a profile that is not
// the agent's and that the next boot does not have (one an admin added in
// memory, under /run), and the server sends a profile of its own for that
// NIC with autoconnect=false: at the boot NetworkManager brings up neither.
// The device is disconnected for the check, which fails; the rollback
// brings the admin's connection back.
func TestStrandDownBesideOtherProfile(t *testing.T) {
	r, m := labNode(t, "strand: autoconnect=false beside a runtime profile", downTemplate)
	start := m.boot(active, false)
	const adminUUID = "6a1f3c2e-8b4d-4e7a-9c1b-2d3e4f5a6b70"
	admin := []byte("[connection]\nid=admin-nic\nuuid=" + adminUUID + "\ntype=ethernet\ninterface-name=" + nodeIf +
		"\n\n[ipv4]\nmethod=manual\naddress1=" + cidr(bootstrap) + "\n\n[ipv6]\nmethod=disabled\n")
	dir := m.path("run/NetworkManager/system-connections")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "admin-nic.nmconnection"), admin, 0o600))
	must(t, m.nmcli("connection", "reload"))
	must(t, m.nmcli("connection", "up", "uuid", adminUUID))
	r.boot("admin profile", m.waitAddr(start, cidr(bootstrap)))

	res := m.runAgent(nil)
	if res.code != 75 || !strings.Contains(res.out, "reachability check") {
		t.Errorf("agent exit %d, want 75 with the reachability check failed", res.code)
	}
	waitFor(t, "the admin's connection back after the rollback", m.reachesServer, m.diag)
	if m.exists(applicator) {
		t.Error("the rolled-back config was persisted")
	}
}

// movedIP is the server's second address, on pool-b's subnet, where it
// moves the registration URL to (regserver's --external-url, a real
// server's way to move it).
const movedIP = "10.240.0.1"

// TestStrandMovedURL: the server moves `url` to movedIP and sends a
// config (cutOffTemplate, a pool-b address only) after which only the
// moved URL answers, not the node's configured server. The next boot asks
// the configured one, so the check must too: it fails, the apply is rolled
// back (exit 75), and the node reaches the configured server after the
// reboot. Asking the moved URL, the check passed, the agent exited 0 and
// the node was cut off from the next boot on.
func TestStrandMovedURL(t *testing.T) {
	r, m, addr := bootedNode(t, "strand: url moved, configured server cut off, rolled back")
	run(t, labkit.InNS(m.srvNS, "ip", "addr", "add", fmt.Sprintf("%s/%d", movedIP, prefixLen), "dev", serverIf)...)
	m.startServerOn(serverConfig(cutOffTemplate), net.JoinHostPort("0.0.0.0", port), "--external-url", "http://"+net.JoinHostPort(movedIP, port))
	start := m.boot(active, false)
	r.boot("reboot", m.waitAddr(start, cidr(addr)))
	res := strandCheck(t, m, r, nil, 75, "reachability check")
	moved := "from http://" + net.JoinHostPort(serverIP, port) + "/elemental/registration/"
	to := "to http://" + net.JoinHostPort(movedIP, port) + "/elemental/registration/"
	if !strings.Contains(res.out, "moves elemental.registration.url "+moved) || !strings.Contains(res.out, to) || strings.Contains(res.out, "boot-token") {
		t.Errorf("the agent's output lacks the move's warning with both URLs (tokens redacted)")
	}
	if kf := string(m.keyfile(nodeIf)); !strings.Contains(kf, "address1="+cidr(addr)+",10.231.0.1") {
		t.Errorf("keyfile after the rollback:\n%s", kf)
	}
}
