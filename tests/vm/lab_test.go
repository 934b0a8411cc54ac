//go:build vmlab

package vm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

// The segment between the guests and the server's namespace: a plain bridge,
// no DHCP server anywhere on it. Pool addresses are data inside it only.
const (
	serverIP   = "10.231.0.1"
	serverIP6  = "2001:db8:1::1"
	serverPort = "8080"
	adminAddr  = "127.0.0.1:9090"
)

// lab is the host side of the VM lab: one network namespace with the bridge
// and the taps, regserver listening in it, and every process the lab starts,
// so cleanup stops them whatever happened.
type lab struct {
	repo    string // repository root
	imgDir  string // base.img, vmlinuz, initrd.img
	runDir  string // per-run artefacts: machines, logs, the server's store
	ns      string
	regCfg  string
	regLog  string
	store   string
	reg     *labkit.Regserver
	mu      sync.Mutex
	started []*exec.Cmd
}

func (l *lab) sh(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (l *lab) inNS(argv ...string) []string {
	return labkit.InNS(l.ns, argv...)
}

// setupNet creates the namespace and its bridge; the taps come per machine.
func (l *lab) setupNet() error {
	l.ns = fmt.Sprintf("nrvm%d", os.Getpid())
	if err := os.WriteFile(filepath.Join(l.runDir, "netns"), []byte(l.ns+"\n"), 0o644); err != nil {
		return err
	}
	if err := labkit.CreateNS(l.ns); err != nil {
		return fmt.Errorf("lab network: %w", err)
	}
	steps := [][]string{
		l.inNS("ip", "link", "set", "lo", "up"),
		l.inNS("ip", "link", "add", "br0", "type", "bridge", "stp_state", "0"),
		l.inNS("sysctl", "-q", "-w", "net.ipv6.conf.br0.accept_dad=0"),
		l.inNS("ip", "addr", "add", serverIP+"/24", "dev", "br0"),
		l.inNS("ip", "addr", "add", serverIP6+"/64", "dev", "br0", "nodad"),
		l.inNS("ip", "link", "set", "br0", "up"),
	}
	for _, s := range steps {
		if err := l.sh(s...); err != nil {
			return fmt.Errorf("lab network: %w", err)
		}
	}
	return nil
}

// addTap creates a persistent tap on the bridge for one guest NIC.
func (l *lab) addTap(name string) error {
	for _, s := range [][]string{
		l.inNS("ip", "tuntap", "add", "dev", name, "mode", "tap"),
		l.inNS("ip", "link", "set", name, "master", "br0"),
		l.inNS("ip", "link", "set", name, "up"),
	} {
		if err := l.sh(s...); err != nil {
			return err
		}
	}
	return nil
}

// track records a started process for cleanup; untrack forgets one that
// ended.
func (l *lab) track(c *exec.Cmd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, c)
}

// cleanup stops every process the lab started (by its pid: SIGTERM, then
// SIGKILL after 10 s) and deletes the namespace.
func (l *lab) cleanup() {
	l.mu.Lock()
	procs := l.started
	l.started = nil
	l.mu.Unlock()
	for _, c := range procs {
		stopProc(c, 10*time.Second)
	}
	l.reg.Stop(10 * time.Second)
	if l.ns != "" {
		_ = labkit.DeleteNS(l.ns)
	}
}

// stopProc ends one started process and reaps it.
func stopProc(c *exec.Cmd, grace time.Duration) {
	if c == nil || c.Process == nil || c.ProcessState != nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	_ = c.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = c.Process.Kill()
		<-done
	}
}

// startServer starts regserver in the namespace with config cfg (YAML text)
// on the lab's store, so a restart with another template keeps every
// inventory and claim, as a real server's would. It returns once the admin
// API answers.
func (l *lab) startServer(cfg string) error {
	if err := os.WriteFile(l.regCfg, []byte(cfg), 0o644); err != nil {
		return err
	}
	// The admin API requires a bearer token on every listener
	// (docs/regserver.md); the lab gives it one of its own.
	rs, err := labkit.RegserverOptions{NS: l.ns, Args: []string{"--config", l.regCfg,
		"--listen", net.JoinHostPort(serverIP, serverPort), "--admin-listen", adminAddr, "--store", l.store},
		AdminToken: labAdminToken, AdminTokenFile: l.tokenFile(), LogFile: l.regLog}.Launch()
	if err != nil {
		return fmt.Errorf("regserver in the lab namespace: %w", err)
	}
	l.reg = rs
	// For tests/vm/run.sh, should this binary be stopped from outside.
	_ = os.WriteFile(filepath.Join(l.runDir, "regserver.pid"), []byte(fmt.Sprintln(rs.Cmd.Process.Pid)), 0o644)
	return nil
}

// labAdminToken is the admin API's bearer token in the lab.
const labAdminToken = "vmlab-admin-token-0123456789abc"

func (l *lab) tokenFile() string { return filepath.Join(l.runDir, "regserver.admin-token") }

// stopServer stops regserver (SIGTERM, as a server going down for
// maintenance), keeping its store.
func (l *lab) stopServer() {
	l.reg.Stop(15 * time.Second)
	l.reg = nil
}

// admin calls regserver's admin API from inside the lab namespace.
func (l *lab) admin(method, path string) ([]byte, error) {
	return labkit.Admin{NS: l.ns, Addr: adminAddr, Token: labAdminToken}.Do(method, path)
}

// inventory is the part of regserver's admin view the cases check.
type inventory struct {
	Name         string `json:"name"`
	Hash         string `json:"hash"`
	AuthKind     string `json:"authKind"`
	Registration string `json:"registration"`
	Claims       []struct {
		Name    string `json:"name"`
		Pool    string `json:"pool"`
		Address string `json:"address"`
	} `json:"claims"`
}

// inventoryOf is the inventory of the registration reg (one machine per
// registration in the lab).
func (l *lab) inventoryOf(reg string) (inventory, error) {
	b, err := l.admin(http.MethodGet, "/admin/inventories")
	if err != nil {
		return inventory{}, err
	}
	var all []inventory
	if err := json.Unmarshal(b, &all); err != nil {
		return inventory{}, fmt.Errorf("admin inventories: %w: %s", err, b)
	}
	var found []inventory
	for _, inv := range all {
		if inv.Registration == reg {
			found = append(found, inv)
		}
	}
	if len(found) != 1 {
		return inventory{}, fmt.Errorf("regserver has %d inventories of registration %s, want 1: %s", len(found), reg, b)
	}
	return found[0], nil
}

// claim is the address the inventory holds under placeholder name.
func (inv inventory) claim(name string) string {
	for _, c := range inv.Claims {
		if c.Name == inv.Name+"-"+name {
			return c.Address
		}
	}
	return ""
}

// pingFromHost pings addr from the lab namespace until it answers.
func (l *lab) pingFromHost(addr string, bound time.Duration) error {
	return waitFor("ping "+addr+" from the lab namespace", bound, func() (bool, string) {
		argv := l.inNS("ping", "-c", "1", "-W", "2", addr)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		return err == nil, strings.TrimSpace(string(out))
	})
}
