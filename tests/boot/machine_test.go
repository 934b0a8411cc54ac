//go:build bootsim

package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mudler/yip/pkg/executor"
	"github.com/mudler/yip/pkg/plugins"
	"github.com/sirupsen/logrus"
	"github.com/twpayne/go-vfs/v4"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

const (
	keyfileDir = "etc/NetworkManager/system-connections"
	applicator = "oem/elemental-network.yaml"
	stateFile  = "oem/registration/state.yaml"
	manifest   = "oem/nodereg/network-manifest.json"
)

// machine is a node: a lab and a scratch root standing for its disk.
type machine struct {
	*lab
	root string
	mac  string
	// nmStarted is when the last boot started NetworkManager.
	nmStarted time.Time
	// keepEtc: /etc survives a boot, as on images that keep it (the crash
	// cases); else it is ephemeral, as on Elemental.
	keepEtc bool
	// stageErr is the last boot's initramfs stage error; a boot fails on
	// one unless tolerateStage (a crash case's torn file under /oem).
	stageErr      error
	tolerateStage bool
}

func newMachine(t *testing.T, cfg string) *machine {
	t.Helper()
	return machineOn(newLab(t, cfg), "52:54:00:31:00:02")
}

// machineOn is a machine in lab l whose NIC's permanent MAC is mac (its
// SMBIOS UUID ends in the MAC's digits).
func machineOn(l *lab, mac string) *machine {
	t := l.t
	t.Helper()
	m := &machine{lab: l, root: t.TempDir(), mac: mac}
	l.runNM = m.path("run/NetworkManager")
	// The identity the agent's mac auth reads (the veth's own MAC is
	// random; a NIC's permanent one is what a real node sends).
	nic := m.path("sys/class/net/" + nodeIf)
	must(t, os.MkdirAll(nic, 0o755))
	must(t, os.WriteFile(filepath.Join(nic, "address"), []byte(m.mac+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(nic, "addr_assign_type"), []byte("0\n"), 0o644))
	dmi := m.path("sys/class/dmi/id")
	must(t, os.MkdirAll(dmi, 0o755))
	must(t, os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte(m.uuid()+"\n"), 0o644))
	m.writeConfig("auth: mac")
	return m
}

// uuid is the machine's SMBIOS system UUID.
func (m *machine) uuid() string {
	return "00000000-0000-4000-8000-" + strings.ReplaceAll(m.mac, ":", "")
}

// writeConfig writes the registration config with the given extra lines
// under elemental.registration (the install put it under /oem).
func (m *machine) writeConfig(lines ...string) {
	m.t.Helper()
	text := "elemental:\n  registration:\n    url: " + m.url() + "\n"
	for _, l := range lines {
		text += "    " + l + "\n"
	}
	p := m.path("oem/registration/config.yaml")
	must(m.t, os.MkdirAll(filepath.Dir(p), 0o700))
	must(m.t, os.WriteFile(p, []byte(text), 0o600))
}

func (m *machine) path(p string) string { return filepath.Join(m.root, filepath.FromSlash(p)) }

func (m *machine) read(p string) []byte {
	m.t.Helper()
	b, err := os.ReadFile(m.path(p))
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

func (m *machine) exists(p string) bool {
	_, err := os.Stat(m.path(p))
	return err == nil
}

// Boot modes: the sentinel file each writes under /run/elemental.
const (
	active   = "active_mode"
	passive  = "passive_mode"
	recovery = "recovery_mode"
)

// boot simulates a power cycle up to the point the registration service
// starts: NetworkManager stops, the NIC loses its addresses, the ephemeral
// /etc and /run are cleared, the mode sentinel is set, the initramfs stage
// runs the yip files under /oem, and NetworkManager starts and settles.
// bootstrapAddr, when set, is put on the NIC before NetworkManager starts,
// as an installer or DHCP would on a first boot. It returns when the boot
// started.
func (m *machine) boot(mode string, bootstrapAddr bool) time.Time {
	m.t.Helper()
	if m.nm != nil {
		m.stopNM()
	}
	run(m.t, m.inNode("ip", "addr", "flush", "dev", nodeIf)...)
	run(m.t, m.inNode("ip", "link", "set", nodeIf, "down")...)
	m.removeSoftwareLinks()
	start := time.Now()
	wiped := []string{"etc", "run"}
	if m.keepEtc {
		wiped = wiped[1:]
	}
	for _, d := range wiped {
		must(m.t, os.RemoveAll(m.path(d)))
	}
	// What the image itself carries in /etc, and the sentinel dracut
	// writes from elemental.mode= on the kernel command line.
	must(m.t, os.MkdirAll(m.path(keyfileDir), 0o755))
	must(m.t, os.MkdirAll(m.path("run/elemental"), 0o755))
	must(m.t, os.WriteFile(m.path("run/elemental/"+mode), []byte("1"), 0o644))
	m.stageErr = runStage(m.root, "/oem", "initramfs")
	if m.stageErr != nil && !m.tolerateStage {
		m.t.Fatalf("boot (%s): initramfs stage: %v", mode, m.stageErr)
	}
	if bootstrapAddr {
		run(m.t, m.inNode("ip", "addr", "add", fmt.Sprintf("%s/%d", bootstrap, prefixLen), "dev", nodeIf)...)
	}
	run(m.t, m.inNode("ip", "link", "set", nodeIf, "up")...)
	m.nmStarted = time.Now()
	m.startNM(m.path(keyfileDir))
	return start
}

// removeSoftwareLinks deletes the links NetworkManager created (a bridge,
// a bond, a VLAN): a power cycle does not keep them, and left in place
// they would be taken over as "externally configured" at the next start.
func (m *machine) removeSoftwareLinks() {
	m.t.Helper()
	out := run(m.t, m.inNode("ip", "-j", "link", "show")...)
	var links []struct {
		Name string `json:"ifname"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		m.t.Fatalf("ip link: %v: %s", err, out)
	}
	for _, l := range links {
		if l.Name != "lo" && l.Name != nodeIf {
			run(m.t, m.inNode("ip", "link", "del", l.Name)...)
		}
	}
}

// waitAddr waits until the NIC carries want and returns the time since
// start.
func (m *machine) waitAddr(start time.Time, want string) time.Duration {
	m.t.Helper()
	waitFor(m.t, "address "+want+" on "+nodeIf, func() bool { return slices.Contains(m.addrs(), want) },
		m.diag)
	return time.Since(start)
}

// diag is what a failed wait shows: the interface as the kernel and as
// NetworkManager see it, and NetworkManager's last words.
func (m *machine) diag() string {
	ipOut, _ := exec.Command("ip", "-n", m.nodeNS, "addr", "show", "dev", nodeIf).CombinedOutput()
	dev, _ := m.nmcliOut("device", "show", nodeIf)
	conns, _ := m.nmcliOut("-f", "NAME,UUID,DEVICE,FILENAME", "connection", "show")
	return fmt.Sprintf("ip addr:\n%s\nnmcli device show:\n%s\nnmcli connection show:\n%s\nNetworkManager log:\n%s", ipOut, dev, conns, m.logTail(m.nm))
}

// agentRun is one run of bin/nodereg-agent: its exit code and combined output; err
// is set when it could not be run at all.
type agentRun struct {
	code int
	out  string
	err  error
}

// runAgent runs bin/nodereg-agent in the node's namespace as the boot service
// would, talking to the namespace's NetworkManager through the private bus.
func (m *machine) runAgent(extraEnv []string, args ...string) agentRun {
	m.t.Helper()
	res := m.runAgentNoFatal(extraEnv, args...)
	if res.err != nil {
		m.t.Fatalf("running the agent: %v", res.err)
	}
	return res
}

// reachabilityWindow is the agent's --reachability-window in the lab.
const reachabilityWindow = "5s"

// runAgentNoFatal is runAgent for a goroutine of its own (machines booting
// at the same time): it reports a failure to start in err.
func (m *machine) runAgentNoFatal(extraEnv []string, args ...string) agentRun {
	argv := m.inNode(append([]string{"env", m.busEnv}, extraEnv...)...)
	// A shorter reachability window than the default 15 s: the cut-off
	// cases wait all of it before they roll back, and a good network
	// answers over the veth within a second.
	argv = append(argv, m.agent, "--root", m.root, "--apply-live", "--deadline", "30s", "--network-timeout", "30s", "--reachability-window", reachabilityWindow)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	res := agentRun{out: out.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		res.err = err
	}
	m.t.Logf("agent %s (%s): exit %d\n%s", strings.Join(args, " "), m.mac, res.code, res.out)
	return res
}

// runStage runs one boot stage (with its .before and .after, as elemental
// run-stage does) over the yip files in dir, against root, with mudler/yip's
// executor configured like Elemental's: only the node and if conditionals.
func runStage(root, dir, stage string) error {
	l := logrus.New()
	l.SetOutput(io.Discard)
	ex := executor.NewExecutor(executor.WithLogger(l),
		executor.WithConditionals(plugins.NodeConditional, plugins.IfConditional))
	fs := vfs.NewPathFS(vfs.OSFS, root)
	if err := node.PrepareShellRoot(root); err != nil {
		return fmt.Errorf("preparing %s for yip's shell: %w", root, err)
	}
	con := rootConsole{root: root}
	var errs []error
	for _, s := range []string{stage + ".before", stage, stage + ".after"} {
		if err := ex.Run(s, fs, con, dir); err != nil {
			errs = append(errs, fmt.Errorf("stage %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// rootConsole runs yip's `if` and `commands` chrooted into the scratch root,
// as Elemental runs the initramfs stage chrooted into the node's root, so a
// sentinel or guard check sees the node's /run and /oem, not the host's. The
// host's /usr is bind-mounted read-only into the root for the shell, in a
// private mount namespace that ends with the command.
type rootConsole struct {
	root string
}

func (c rootConsole) Run(cmd string, opts ...func(*exec.Cmd)) (string, error) {
	return node.ChrootRun(c.root, cmd, opts...)
}

func (c rootConsole) Start(cmd *exec.Cmd, opts ...func(*exec.Cmd)) error {
	return fmt.Errorf("boot simulation: yip asked to start %s: no step of the node's files should", cmd.Path)
}

func (c rootConsole) RunTemplate(st []string, template string) error {
	for _, s := range st {
		if _, err := c.Run(strings.ReplaceAll(template, "%s", s)); err != nil {
			return err
		}
	}
	return nil
}
