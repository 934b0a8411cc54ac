//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

const (
	// The lab's private subnet: it exists only inside the namespaces the
	// test creates, so nothing reaches the host's networks.
	serverIP  = "10.231.0.1"
	bootstrap = "10.231.0.2"
	prefixLen = 24
	// Interface names, each inside its own namespace.
	serverIf = "nrsrv0"
	nodeIf   = "nrnode0"
	port     = "8080"
	// regserver's admin API listens apart from the registrations.
	adminPort = "8081"
	udevd     = "/lib/systemd/systemd-udevd"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// requireLab skips unless this machine can run the simulation.
func requireLab(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("boot simulation needs root (network namespaces, mounts, NetworkManager)")
	}
	for _, b := range []struct{ bin, pkg string }{
		{"ip", "iproute2"}, {"unshare", "util-linux"}, {"dbus-daemon", "dbus"},
		{"NetworkManager", "network-manager"}, {"nmcli", "network-manager"}, {"nm-online", "network-manager"},
		{"udevadm", "udev"}, {udevd, "udev"}, {"go", "golang"},
	} {
		if _, err := exec.LookPath(b.bin); err != nil {
			t.Skipf("boot simulation needs %s (apt package %s): %v", b.bin, b.pkg, err)
		}
	}
	if out, err := exec.Command("unshare", "--mount", "--net", "true").CombinedOutput(); err != nil {
		t.Skipf("boot simulation cannot create namespaces here: %v %s", err, bytes.TrimSpace(out))
	}
}

// lab is one machine's surroundings: the two namespaces, the private bus,
// udevd and NetworkManager of the node, and regserver.
type lab struct {
	t       *testing.T
	dir     string // private files of the lab (bus socket, logs, configs)
	srvNS   string
	nodeNS  string
	busEnv  string
	udevDir string // bind-mounted at /run/udev for udevd and NetworkManager
	nm      *proc
	reg     *labkit.Regserver
	regCfg  string
	store   string
	agent   string
	// id names the lab's namespaces; bridged: the server side is a bridge.
	id      string
	bridged bool
	// runNM, when set, is bound at /run/NetworkManager for NetworkManager:
	// its runtime keyfile directory is compiled in, and the agent under
	// --root writes the bootstrap profiles to <root>/run/NetworkManager.
	runNM string
}

// proc is a process started by the lab, stopped by its PID.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs argv with its output in logName under the lab dir. The
// commands exec all the way down (ip netns exec, unshare, sh -c exec), so
// the PID is the daemon's own.
func (l *lab) start(logName string, argv ...string) *proc {
	l.t.Helper()
	logPath := filepath.Join(l.dir, logName)
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		l.t.Fatalf("starting %s: %v", strings.Join(argv, " "), err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	l.t.Cleanup(p.stop)
	return p
}

// logTail is the last 4000 bytes of p's log, read from there: a daemon's
// log (NetworkManager at debug) may be far longer than what a failure
// message shows.
func (l *lab) logTail(p *proc) string {
	f, err := os.Open(p.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 4000 {
		_, _ = f.Seek(fi.Size()-4000, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4000))
	return string(b)
}

func run(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// inNode runs argv in the node's namespace.
func (l *lab) inNode(argv ...string) []string {
	return labkit.InNS(l.nodeNS, argv...)
}

// privateRun is the shell prefix that gives a process a /run of its own
// (so nothing of the host's /run is read or written) with the lab's udev
// database at /run/udev, shared by udevd and NetworkManager.
const privateRun = `mount -t tmpfs tmpfs /run && mkdir /run/udev && mount --bind "$UDEV" /run/udev && `

func (l *lab) privately(script string, args ...string) []string {
	argv := l.inNode("unshare", "--mount", "--propagation", "private", "env", "UDEV="+l.udevDir, "sh", "-c", privateRun+script, "sh")
	return append(argv, args...)
}

// labCount numbers the labs of this test process.
var labCount atomic.Int32

// newLab builds the namespaces, the veth, the node's bus and udevd, and
// starts regserver with cfg.
func newLab(t *testing.T, cfg string) *lab {
	t.Helper()
	requireLab(t)
	l := &lab{t: t, dir: t.TempDir()}
	// Names unique per process and test, short enough for IFNAMSIZ-free use.
	// The tests run in parallel: the counter keeps two labs of this process
	// apart even when they start within the same clock tick.
	l.id = fmt.Sprintf("%d%x%d", os.Getpid()%100000, time.Now().UnixNano()%0xffff, labCount.Add(1))
	l.srvNS, l.nodeNS = "nrbs"+l.id, "nrbn"+l.id
	for _, ns := range []string{l.srvNS, l.nodeNS} {
		addNS(t, ns)
	}
	// The veth is created inside the namespaces: it never exists in the
	// host's.
	run(t, labkit.InNS(l.srvNS, "ip", "link", "add", serverIf, "type", "veth", "peer", "name", nodeIf, "netns", l.nodeNS)...)
	run(t, labkit.InNS(l.srvNS, "ip", "addr", "add", fmt.Sprintf("%s/%d", serverIP, prefixLen), "dev", serverIf)...)
	run(t, labkit.InNS(l.srvNS, "ip", "link", "set", serverIf, "up")...)
	run(t, labkit.InNS(l.srvNS, "ip", "link", "set", "lo", "up")...)
	l.startNodeServices()

	l.agent = testbin.Build(t, "./cmd/agent")
	l.regCfg = filepath.Join(l.dir, "regserver.yaml")
	l.store = filepath.Join(l.dir, "regserver-store.json")
	l.startServer(cfg)
	return l
}

func addNS(t *testing.T, ns string) {
	t.Helper()
	labkit.AddNS(t, ns, "boot simulation")
}

// startNodeServices gives the node namespace its loopback, its udevd and
// its system bus.
func (l *lab) startNodeServices() {
	t := l.t
	t.Helper()
	run(t, l.inNode("ip", "link", "set", "lo", "up")...)
	// A udevd of the node's own: the kernel sends a namespace's uevents
	// only into that namespace, and NetworkManager leaves a device without
	// a udev database entry unmanaged.
	l.udevDir = filepath.Join(l.dir, "udev")
	must(t, os.Mkdir(l.udevDir, 0o755))
	ud := l.start("udevd.log", l.privately(`exec "$1"`, udevd)...)
	waitFor(t, "udevd's control socket", func() bool {
		_, err := os.Stat(filepath.Join(l.udevDir, "control"))
		return err == nil && !ud.exited()
	}, func() string { return l.logTail(ud) })
	run(t, l.privately(`udevadm trigger --action=add --subsystem-match=net && udevadm settle --timeout=30`)...)

	bus := filepath.Join(l.dir, "bus")
	l.busEnv = "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + bus
	db := l.start("dbus.log", l.inNode("dbus-daemon", "--config-file=/usr/share/dbus-1/system.conf",
		"--address=unix:path="+bus, "--nofork", "--nopidfile")...)
	waitFor(t, "the private system bus", func() bool {
		_, err := os.Stat(bus)
		return err == nil && !db.exited()
	}, func() string { return l.logTail(db) })
}

// bridgeName is the server namespace's bridge once a second node joins.
const bridgeName = "nrsbr0"

// bridge turns the server's side of the segment into a bridge (once): the
// server's address moves from its veth to the bridge, the veth becomes a
// port, and further nodes (addPeer) and hosts (addHolder) join as ports.
func (l *lab) bridge() {
	if l.bridged {
		return
	}
	inSrv := func(argv ...string) { run(l.t, labkit.InNS(l.srvNS, argv...)...) }
	inSrv("ip", "link", "add", bridgeName, "type", "bridge", "stp_state", "0", "forward_delay", "0")
	inSrv("ip", "addr", "del", fmt.Sprintf("%s/%d", serverIP, prefixLen), "dev", serverIf)
	inSrv("ip", "link", "set", serverIf, "master", bridgeName)
	inSrv("ip", "addr", "add", fmt.Sprintf("%s/%d", serverIP, prefixLen), "dev", bridgeName)
	inSrv("ip", "link", "set", bridgeName, "up")
	l.bridged = true
	waitFor(l.t, "regserver on the bridge", l.serverUp, l.regTail)
}

// joinBridge creates a veth from the bridge (port srvIf) into namespace ns,
// where it is named ifName.
func (l *lab) joinBridge(srvIf, ns, ifName string) {
	l.bridge()
	inSrv := func(argv ...string) { run(l.t, labkit.InNS(l.srvNS, argv...)...) }
	inSrv("ip", "link", "add", srvIf, "type", "veth", "peer", "name", ifName, "netns", ns)
	inSrv("ip", "link", "set", srvIf, "master", bridgeName)
	inSrv("ip", "link", "set", srvIf, "up")
}

// addPeer is a second node on the server's segment: a namespace of its own
// with NIC nodeIf behind the bridge (port srvIf), its own udevd, bus and
// NetworkManager, sharing regserver and the agent binary.
func (l *lab) addPeer(srvIf string) *lab {
	l.t.Helper()
	p := &lab{t: l.t, dir: l.t.TempDir(), id: l.id, srvNS: l.srvNS, nodeNS: "nrbn" + l.id + srvIf[len(srvIf)-1:],
		reg: l.reg, regCfg: l.regCfg, store: l.store, agent: l.agent, bridged: true}
	addNS(l.t, p.nodeNS)
	l.joinBridge(srvIf, p.nodeNS, nodeIf)
	p.startNodeServices()
	return p
}

// addHolder is a plain host on the segment (no NetworkManager) that holds
// addr, as a machine the admin forgot about would: it answers ARP for it.
func (l *lab) addHolder(srvIf, addr string) {
	l.t.Helper()
	ns := "nrbh" + l.id
	addNS(l.t, ns)
	l.joinBridge(srvIf, ns, "nrhold0")
	in := func(argv ...string) { run(l.t, labkit.InNS(ns, argv...)...) }
	in("ip", "addr", "add", fmt.Sprintf("%s/%d", addr, prefixLen), "dev", "nrhold0")
	in("ip", "link", "set", "nrhold0", "up")
	in("ip", "link", "set", "lo", "up")
}

// startServer (re)starts regserver with cfg on the lab's store.
func (l *lab) startServer(cfg string) {
	l.t.Helper()
	l.startServerOn(cfg, net.JoinHostPort(serverIP, port))
}

// startServerOn is startServer with regserver listening on listen, with
// more flags.
func (l *lab) startServerOn(cfg, listen string, flags ...string) {
	l.t.Helper()
	l.restartServer(cfg, append([]string{"--listen", listen, "--admin-listen", net.JoinHostPort(serverIP, adminPort)}, flags...)...)
}

// restartServer stops regserver (SIGTERM, as for maintenance) and starts
// it again in the server's namespace on the lab's store with cfg ("" keeps
// the config it has) and flags; the start waits until it listens (and its admin API answers, when
// it has one). Its output goes on in regserver.log.
func (l *lab) restartServer(cfg string, flags ...string) {
	l.t.Helper()
	l.reg.Stop(10 * time.Second)
	if cfg != "" {
		must(l.t, os.WriteFile(l.regCfg, []byte(cfg), 0o600))
	}
	l.reg = labkit.RegserverOptions{NS: l.srvNS, Args: append([]string{"--config", l.regCfg, "--store", l.store}, flags...),
		LogFile: filepath.Join(l.dir, "regserver.log")}.Start(l.t)
}

// regTail is the end of the running regserver's log.
func (l *lab) regTail() string { return l.reg.LogTail() }

func (l *lab) serverUp() bool {
	_, err := l.admin(http.MethodGet, "/admin/pools")
	return err == nil
}

func (l *lab) url() string {
	return "http://" + net.JoinHostPort(serverIP, port) + "/elemental/registration/boot-token"
}

// admin calls regserver's admin API from inside the server's namespace
// with the token regserver generated at its start: the client the start
// made, which already waited for the API to answer.
func (l *lab) admin(method, path string) ([]byte, error) {
	return l.reg.Admin.Do(method, path)
}

// inventory is the part of regserver's admin view the cases check.
type inventory struct {
	Name     string `json:"name"`
	AuthKind string `json:"authKind"`
	Claims   []struct {
		Name    string `json:"name"`
		Pool    string `json:"pool"`
		Address string `json:"address"`
	} `json:"claims"`
}

func (l *lab) inventories() []inventory {
	l.t.Helper()
	b, err := l.admin(http.MethodGet, "/admin/inventories")
	if err != nil {
		l.t.Fatalf("regserver inventories: %v", err)
	}
	var out []inventory
	if err := json.Unmarshal(b, &out); err != nil {
		l.t.Fatalf("regserver inventories: %v: %s", err, b)
	}
	return out
}

// claimed is the address regserver holds for the only inventory under claim
// name, failing unless there is exactly one inventory.
func (l *lab) claimed(name string) string {
	l.t.Helper()
	invs := l.inventories()
	if len(invs) != 1 {
		l.t.Fatalf("regserver has %d inventories, want 1: %+v", len(invs), invs)
	}
	for _, c := range invs[0].Claims {
		// regserver names a claim <inventory>-<name>, as the CAPI claims
		// elemental-operator creates.
		if c.Name == invs[0].Name+"-"+name {
			return c.Address
		}
	}
	l.t.Fatalf("regserver's inventory %s has no claim %q: %+v", invs[0].Name, name, invs[0].Claims)
	return ""
}

// nmConf is NetworkManager's config: keyfiles from the scratch root only,
// nothing of the host's DNS or hostname touched, no automatic profiles, and
// the veth managed although Debian's udev rules mark veths unmanaged.
func nmConf(keyfileDir string) string {
	return "[main]\nplugins=keyfile\ndns=none\nrc-manager=unmanaged\nhostname-mode=none\nno-auto-default=*\n" +
		"[keyfile]\npath=" + keyfileDir + "\n" +
		"[device-nodereg-boot]\nmatch-device=interface-name:" + nodeIf + "\nmanaged=1\n"
}

// startNM starts NetworkManager in the node namespace and waits for its
// start-up to complete, as NetworkManager-wait-online would.
func (l *lab) startNM(keyfileDir string) {
	l.t.Helper()
	conf := filepath.Join(l.dir, "NetworkManager.conf")
	must(l.t, os.WriteFile(conf, []byte(nmConf(keyfileDir)), 0o600))
	// /var/lib/NetworkManager is a private tmpfs: the host's stays as is.
	script := `mount -t tmpfs tmpfs /var/lib/NetworkManager && exec env "$1" NetworkManager --no-daemon --debug --log-level=INFO --config "$2" --state-file "$3"`
	args := []string{l.busEnv, conf, filepath.Join(l.dir, "NetworkManager.state")}
	if l.runNM != "" {
		// The node's /run/NetworkManager is the scratch root's, so the
		// runtime profiles the agent writes there are the ones NM reads.
		must(l.t, os.MkdirAll(l.runNM, 0o755))
		script = `mkdir -p /run/NetworkManager && mount --bind "$4" /run/NetworkManager && ` + script
		args = append(args, l.runNM)
	}
	l.nm = l.start("NetworkManager.log", l.privately(script, args...)...)
	waitFor(l.t, "NetworkManager on the private bus", func() bool {
		return !l.nm.exited() && l.nmcli("-t", "general", "status") == nil
	}, func() string { return l.logTail(l.nm) })
	cmd := exec.Command("nm-online", "-s", "-q", "-t", "60")
	cmd.Env = append(os.Environ(), l.busEnv)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("nm-online: %v %s\n%s", err, out, l.logTail(l.nm))
	}
}

func (l *lab) stopNM() {
	l.nm.stop()
	l.nm = nil
}

func (l *lab) nmcli(args ...string) error {
	_, err := l.nmcliOut(args...)
	return err
}

func (l *lab) nmcliOut(args ...string) (string, error) {
	cmd := exec.Command("nmcli", args...)
	cmd.Env = append(os.Environ(), l.busEnv)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("nmcli %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// profiles lists the connection ids NetworkManager holds.
func (l *lab) profiles() []string {
	l.t.Helper()
	out, err := l.nmcliOut("-t", "-f", "NAME", "connection", "show")
	if err != nil {
		l.t.Fatal(err)
	}
	return strings.Fields(out)
}

// addrs lists the node interface's IPv4 addresses as address/prefix.
func (l *lab) addrs() []string {
	l.t.Helper()
	out := run(l.t, l.inNode("ip", "-j", "-4", "addr", "show", "dev", nodeIf)...)
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		l.t.Fatalf("ip addr: %v: %s", err, out)
	}
	var a []string
	for _, link := range links {
		for _, ai := range link.AddrInfo {
			a = append(a, fmt.Sprintf("%s/%d", ai.Local, ai.PrefixLen))
		}
	}
	return a
}

// routes lists the node's IPv4 routes as "dst via gw" ("dst" when direct).
func (l *lab) routes() []string {
	l.t.Helper()
	out := run(l.t, l.inNode("ip", "-j", "-4", "route", "show")...)
	var rs []struct {
		Dst     string `json:"dst"`
		Gateway string `json:"gateway"`
		Dev     string `json:"dev"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		l.t.Fatalf("ip route: %v: %s", err, out)
	}
	var r []string
	for _, e := range rs {
		s := e.Dst
		if e.Gateway != "" {
			s += " via " + e.Gateway
		}
		r = append(r, s)
	}
	return r
}

// waitFor polls cond for up to a minute. It is a readiness wait, not an
// assertion on speed: daemons take a moment to come up.
func waitFor(t *testing.T, what string, cond func() bool, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			if diag != nil {
				msg = diag()
			}
			t.Fatalf("waiting for %s: gave up after a minute\n%s", what, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
