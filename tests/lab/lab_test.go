// Package lab runs bin/regserver and bin/agent in two network namespaces
// joined by a veth pair, with tc netem delay and loss on both ends: the
// registration, the network config and a server crash must all be lived
// through on a bad network. It needs root (CI runs as root) and skips
// where namespaces cannot be made.
package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/tests/internal/node"
	"github.com/nodereg/nodereg/tests/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// Addresses exist only on the veth between the two namespaces.
const (
	serverIP = "10.213.0.1"
	nodeIP   = "10.213.0.2"
	port     = "18443"
)

const serverConfig = `registrations:
- name: lab
  token: lab-token
  machineName: m-${System Information/UUID}
  config:
    elemental:
      registration:
        auth: mac
  network:
    configurator: nmstate
    ipAddresses:
      inventory-ip: pool-a
    config:
      interfaces:
      - name: enp1s0
        type: ethernet
        state: up
        ipv4: {enabled: true, dhcp: false, address: [{ip: "{inventory-ip}", prefix-length: 24}]}
pools:
- name: pool-a
  addresses: [192.168.122.150-192.168.122.160]
  prefix: 24
  gateway: 192.168.122.1
`

type lab struct {
	server, node string // namespace names
	netem        bool   // the netem qdiscs are in place
}

func sh(t *testing.T, args ...string) error {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newLab makes the two namespaces, the veth and the netem qdiscs; it skips
// the test when that is not possible here, and deletes the namespaces
// (and with them the veth) when the test ends, whatever the outcome.
func newLab(t *testing.T, netem string, netemRequired bool) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (apt-get install iproute2)")
	}
	id := fmt.Sprintf("%d%d", os.Getpid()%100000, time.Now().UnixNano()%1000)
	l := &lab{server: "nrlab-s" + id, node: "nrlab-n" + id}
	if err := sh(t, "ip", "netns", "add", l.server); err != nil {
		t.Skipf("cannot create a network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = sh(t, "ip", "netns", "del", l.server) })
	node.Must(t, sh(t, "ip", "netns", "add", l.node))
	t.Cleanup(func() { _ = sh(t, "ip", "netns", "del", l.node) })
	vs, vn := "nrs"+id, "nrn"+id
	if len(vs) > 15 {
		vs, vn = vs[:15], vn[:15]
	}
	for _, c := range [][]string{
		{"ip", "link", "add", vs, "type", "veth", "peer", "name", vn},
		{"ip", "link", "set", vs, "netns", l.server},
		{"ip", "link", "set", vn, "netns", l.node},
		{"ip", "-n", l.server, "addr", "add", serverIP + "/24", "dev", vs},
		{"ip", "-n", l.node, "addr", "add", nodeIP + "/24", "dev", vn},
		{"ip", "-n", l.server, "link", "set", vs, "up"},
		{"ip", "-n", l.node, "link", "set", vn, "up"},
		{"ip", "-n", l.server, "link", "set", "lo", "up"},
		{"ip", "-n", l.node, "link", "set", "lo", "up"},
	} {
		node.Must(t, sh(t, c...))
	}
	if netem != "" {
		if _, err := exec.LookPath("tc"); err != nil {
			t.Skip("needs tc (apt-get install iproute2)")
		}
		for _, c := range [][]string{
			append([]string{"ip", "netns", "exec", l.server, "tc", "qdisc", "add", "dev", vs, "root", "netem"}, strings.Fields(netem)...),
			append([]string{"ip", "netns", "exec", l.node, "tc", "qdisc", "add", "dev", vn, "root", "netem"}, strings.Fields(netem)...),
		} {
			if err := sh(t, c...); err != nil {
				if netemRequired {
					t.Skipf("tc netem is not available here (kernel module sch_netem: apt-get install kmod, modprobe sch_netem): %v", err)
				}
				t.Logf("no tc netem here (%v): running on a clean link", err)
				return l
			}
		}
		l.netem = true
	}
	return l
}

func (l *lab) exec(ns string) []string { return []string{"ip", "netns", "exec", ns} }

// startServer runs bin/regserver in the server namespace on a fixed port,
// so a restarted server is found at the same URL.
func (l *lab) startServer(t *testing.T, dir string, extra ...string) *node.Regserver {
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(serverConfig), 0o600))
	args := append([]string{"--config", cfg, "--store", filepath.Join(dir, "store.json"), "--listen", serverIP + ":" + port, "--no-tpm"}, extra...)
	return node.StartRegserver(t, l.exec(l.server), testbin.Build(t, "./cmd/regserver"), args...)
}

type agentRun struct {
	out  string
	code int
}

// runAgent runs bin/agent in the node namespace against the machine root.
func (l *lab) runAgent(t *testing.T, m *node.Machine, started chan<- struct{}) agentRun {
	bin := testbin.Build(t, "./cmd/agent")
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append(l.exec(l.node), bin, "--root", m.Root, "--debug", "--deadline", "90s", "--network-timeout", "90s")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), apply.EnvNmstatectl+"="+stub,
		"NMSTATECTL_STUB_STATE="+filepath.Join(m.StubDir, "checkpoint"), "NMSTATECTL_STUB_LOG="+filepath.Join(m.StubDir, "calls.jsonl"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	node.Must(t, cmd.Start())
	if started != nil {
		close(started)
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agent: %v", err)
	}
	return agentRun{out: out.String(), code: code}
}

func checkRegistered(t *testing.T, m *node.Machine, r agentRun) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("agent exit %d:\n%s", r.code, r.out)
	}
	st, note, err := agent.LoadState(filepath.Join(m.Root, node.StatePath))
	if err != nil || note != "" || !st.Registered() || st.NetworkDigest == "" {
		t.Fatalf("state after the run: %+v %q %v", st, note, err)
	}
	if l := node.Leftovers(node.Files(t, m.Root)); len(l) > 0 {
		t.Errorf("half-written files: %v", l)
	}
}

// TestBadNetwork: 100 ms delay each way (200 ms RTT) and 5 % loss on both
// ends; registration and the network config complete.
func TestBadNetwork(t *testing.T) {
	l := newLab(t, "delay 100ms loss 5%", true)
	dir := t.TempDir()
	rs := l.startServer(t, dir)
	m := node.New(t, "52:54:00:0d:00:01", rs.URL("lab-token"), "")
	start := time.Now()
	r := l.runAgent(t, m, nil)
	checkRegistered(t, m, r)
	if !strings.Contains(r.out, "192.168.122.150") {
		t.Errorf("agent output does not show the address it got:\n%s", r.out)
	}
	t.Logf("registration + network config over 200 ms RTT, 5 %% loss: %v, %d retries", time.Since(start).Round(time.Millisecond), strings.Count(r.out, "retrying in"))
}

// TestServerKilledMidRun: the server is SIGKILLed once it has registered
// the machine, while the agent waits for its address (the server holds
// every new address back 3 s), and restarted on the same store and address;
// the agent completes on retry within its deadline with the address the
// server claimed before it died.
func TestServerKilledMidRun(t *testing.T) {
	l := newLab(t, "delay 100ms loss 5%", false)
	dir := t.TempDir()
	const delay = "--allocation-delay=3s"
	rs := l.startServer(t, dir, delay)
	m := node.New(t, "52:54:00:0d:00:02", rs.URL("lab-token"), "")
	started := make(chan struct{})
	done := make(chan agentRun, 1)
	go func() { done <- l.runAgent(t, m, started) }()
	<-started
	waitFor(t, rs, "registered")
	rs.Kill()
	time.Sleep(time.Second)
	l.startServer(t, dir, delay)
	r := <-done
	checkRegistered(t, m, r)
	if !strings.Contains(r.out, "192.168.122.150") {
		t.Errorf("agent did not get the first pool address:\n%s", r.out)
	}
	if !strings.Contains(r.out, "retrying in") {
		t.Errorf("the kill did not cost the agent an attempt (no retry logged):\n%s", r.out)
	}
	t.Logf("completed after the server was killed (netem %v): %d retries", l.netem, strings.Count(r.out, "retrying in"))
}

// waitFor polls the server's log until it shows one of the markers.
func waitFor(t *testing.T, rs *node.Regserver, markers ...string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		s := rs.Stderr.String()
		for _, m := range markers {
			if strings.Contains(s, m) {
				return
			}
		}
	}
	t.Fatalf("server never logged %v:\n%s", markers, rs.Stderr.String())
}
