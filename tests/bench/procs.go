package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

// nmstateTemplate is the template of the foundation issue.
const nmstateTemplate = node.NmstateTemplate

// serverConfig has one registration and a pool large enough for every
// machine the bench makes; pool addresses are data only.
func serverConfig() string {
	y := node.ServerConfig{Name: "bench", Network: nmstateTemplate, Pool: "10.88.0.1-10.88.255.254", Prefix: 16, Gateway: "10.88.0.1"}.YAML()
	// A second registration, auth: tpm, for the TPM machines (tpmURL).
	i := strings.Index(y, "pools:\n")
	reg := strings.TrimPrefix(y[:i], "registrations:\n")
	tpm := strings.NewReplacer("- name: bench\n", "- name: bench-tpm\n", "token: bench-token", "token: bench-tpm-token", "auth: mac", "auth: tpm").Replace(reg)
	return y[:i] + tpm + y[i:]
}

// regserver is bin/regserver listening on a free loopback port.
type regserver struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	log  string
}

func startRegserver(bin, dir string, extra ...string) (*regserver, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("regserver: %w", err)
	}
	cfg := filepath.Join(dir, "regserver.yaml")
	if err := os.WriteFile(cfg, []byte(serverConfig()), 0o600); err != nil {
		return nil, fmt.Errorf("regserver: writing config: %w", err)
	}
	logPath := filepath.Join(dir, "regserver.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("regserver: %w", err)
	}
	defer logf.Close()
	// network-wait 0: addresses are ready, so MsgGet must never wait.
	cmd := exec.Command(bin, append([]string{"--config", cfg, "--store", filepath.Join(dir, storeName),
		"--listen", "127.0.0.1:0", "--network-wait", "0"}, extra...)...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("regserver: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("regserver: starting %s: %w", bin, err)
	}
	rs := &regserver{cmd: cmd, log: logPath}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		addr, ok := strings.CutPrefix(l, "listening on ")
		if !ok {
			rs.stop()
			return nil, fmt.Errorf("regserver: unexpected first line %q", l)
		}
		rs.base = addr
		return rs, nil
	case <-time.After(10 * time.Second):
		rs.stop()
		b, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("regserver: no listening line within 10 s: %s", b)
	}
}

func (rs *regserver) url() string { return rs.base + "/elemental/registration/bench-token" }

// tpmURL is the registration for TPM machines: regserver accepts for a
// registration only the authentication its auth names.
func (rs *regserver) tpmURL() string { return rs.base + "/elemental/registration/bench-tpm-token" }

// storeName is the server's store file in its directory.
const storeName = "store.db"

// peakRSS is the server process's VmHWM, in bytes.
func (rs *regserver) peakRSS() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", rs.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", rs.cmd.Process.Pid)
}

// stop ends our regserver by its PID and waits for it.
func (rs *regserver) stop() {
	if rs.cmd == nil || rs.cmd.Process == nil {
		return
	}
	_ = rs.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = rs.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = rs.cmd.Process.Kill()
		<-done
	}
	rs.cmd = nil
}

// machine is a node: a scratch root with a NIC, an SMBIOS UUID and the
// registration config. Its /proc and /sys are otherwise empty, so ghw has
// little to read: the inventory on real hardware is measured separately.
type machine struct {
	root string
	mac  string
}

func newMachine(dir string, n int, url, extra string) (*machine, error) {
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", (n>>16)&0xff, (n>>8)&0xff, n&0xff)
	m := &machine{root: dir, mac: mac}
	files := map[string]string{
		"sys/class/net/eth0/address":          mac + "\n",
		"sys/class/net/eth0/addr_assign_type": "0\n",
		"sys/class/dmi/id/product_uuid":       "00000000-0000-4000-8000-" + strings.ReplaceAll(mac, ":", "") + "\n",
		"oem/registration/config.yaml":        "elemental:\n  registration:\n    url: " + url + "\n" + extra,
	}
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, fmt.Errorf("machine %s: %w", mac, err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			return nil, fmt.Errorf("machine %s: %w", mac, err)
		}
	}
	return m, nil
}

// procRun is one agent process, start to exit.
type procRun struct {
	wall   time.Duration
	cpu    time.Duration // user + system, from wait4's rusage
	maxRSS int64         // bytes, from wait4's rusage
	stderr []byte
}

// runAgent execs the agent on m's root; a non-zero exit is an error that
// carries the agent's log.
func runAgent(bin string, m *machine, env []string, extra ...string) (procRun, error) {
	args := append([]string{"--root", m.root, "--apply-live", "--deadline", "20s", "--network-timeout", "20s"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	r := procRun{wall: wall, stderr: stderr.Bytes()}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
			r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if err != nil {
		return r, fmt.Errorf("agent run on %s: %w\n%s", m.root, err, tail(stderr.Bytes(), 1500))
	}
	return r, nil
}

// timeV runs the agent under /usr/bin/time -v and returns its "Maximum
// resident set size" in bytes.
func timeV(bin string, m *machine, env []string) (int64, error) {
	tv, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		return 0, err
	}
	args := []string{"-v", bin, "--root", m.root, "--apply-live", "--deadline", "20s", "--network-timeout", "20s"}
	cmd := exec.Command(tv, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("/usr/bin/time -v agent: %w\n%s", err, tail(out, 1500))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Maximum resident set size (kbytes):"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/usr/bin/time -v: %q: %w", l, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("/usr/bin/time -v printed no maximum resident set size")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
