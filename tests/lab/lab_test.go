// Package lab runs bin/regserver and bin/nodereg-agent in two network namespaces
// joined by a veth pair, with 100 ms delay and 5 % loss each way: the
// registration, the network config and a server crash must all be lived
// through on a bad network. The impairment is tc netem on both ends of the
// veth; where the kernel has no sch_netem it is the userspace relay in
// ./relay, run in the server namespace, which gives the agent's TCP
// connections the delay and the retransmission stalls netem would. It
// needs root (CI runs as root) and skips where namespaces cannot be made.
package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// Addresses exist only on the veth between the two namespaces.
const (
	serverIP = "10.213.0.1"
	nodeIP   = "10.213.0.2"
	port     = "18443"
	// relayPort is where the userspace relay listens, next to the server.
	relayPort = "18444"
)

// The impairment TestBadNetwork asks for, in both forms.
const (
	netemArgs  = "delay 100ms loss 5%"
	relayDelay = "100ms" // one way, so 200 ms RTT
	relayLoss  = "0.05"
	relayRTO   = "200ms" // the Linux minimum RTO
	relaySeed  = 1
)

var serverConfig = node.ServerConfig{
	Name: "lab", Network: node.AddressOnlyTemplate(24),
	Pool: "192.168.122.150-192.168.122.160", Prefix: 24, Gateway: "192.168.122.1",
}.YAML()

type lab struct {
	server, node string // namespace names
	netem        bool   // the netem qdiscs are in place
	noNetem      error  // why they are not, when they are not
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
// the test when the namespaces are not possible here, notes in l.noNetem
// when netem is not, and deletes the namespaces (and with them the veth)
// when the test ends, whatever the outcome.
var labSeq atomic.Int64

func newLab(t *testing.T, netem string) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (apt-get install iproute2)")
	}
	// The pid keeps other processes' labs apart, the counter this one's
	// parallel tests.
	id := fmt.Sprintf("%d%03d", os.Getpid()%100000, labSeq.Add(1)%1000)
	l := &lab{server: "nrlab-s" + id, node: "nrlab-n" + id}
	labkit.AddNS(t, l.server, "the lab")
	labkit.AddNS(t, l.node, "the lab")
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
			l.noNetem = fmt.Errorf("needs tc (apt-get install iproute2): %w", err)
			return l
		}
		for _, c := range [][]string{
			labkit.InNS(l.server, append([]string{"tc", "qdisc", "add", "dev", vs, "root", "netem"}, strings.Fields(netem)...)...),
			labkit.InNS(l.node, append([]string{"tc", "qdisc", "add", "dev", vn, "root", "netem"}, strings.Fields(netem)...)...),
		} {
			if err := sh(t, c...); err != nil {
				l.noNetem = err
				return l
			}
		}
		l.netem = true
	}
	return l
}

// startServer runs bin/regserver in the server namespace on a fixed port,
// so a restarted server is found at the same URL.
func (l *lab) startServer(t *testing.T, dir string, extra ...string) *labkit.Regserver {
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(serverConfig), 0o600))
	args := append([]string{"--config", cfg, "--store", filepath.Join(dir, "store.json"), "--listen", serverIP + ":" + port, "--no-tpm"}, extra...)
	return labkit.RegserverOptions{NS: l.server, Args: args}.Start(t)
}

// relay is the userspace impairment, a process in the server namespace.
type relay struct {
	*labkit.Process
	base string // http://ADDR of the relay
}

// startRelay runs ./relay in the server namespace, in front of the server
// on the veth address: the agent's connections cross the veth as they
// would to the server, and the relay delays and stalls them. It is killed
// when the test ends if stop has not run.
func (l *lab) startRelay(t *testing.T) *relay {
	t.Helper()
	bin := testbin.Build(t, "./tests/lab/relay")
	argv := labkit.InNS(l.server, bin, "-listen", serverIP+":"+relayPort, "-to", serverIP+":"+port,
		"-delay", relayDelay, "-loss", relayLoss, "-rto", relayRTO, "-seed", fmt.Sprint(relaySeed))
	p := labkit.StartProcess(t, argv...)
	return &relay{Process: p, base: "http://" + p.Listening}
}

// stop ends the relay with SIGTERM (by PID) and returns its figures. The
// minute bounds a relay that hangs on SIGTERM, which would otherwise hold
// the test until go test's own timeout.
func (r *relay) stop(t *testing.T) (conns, segments, lost int) {
	t.Helper()
	if !r.Stop(time.Minute) {
		t.Fatalf("the relay did not exit within a minute of SIGTERM:\n%s", r.Stderr.String())
	}
	for _, l := range strings.Split(r.Stderr.String(), "\n") {
		if _, err := fmt.Sscanf(l, "relay: conns=%d segments=%d lost=%d", &conns, &segments, &lost); err == nil {
			return conns, segments, lost
		}
	}
	t.Fatalf("relay printed no summary:\n%s", r.Stderr.String())
	return 0, 0, 0
}

// impair puts the relay in front of rs when netem is not in place, and
// returns the registration URL the agent is to use.
func (l *lab) impair(t *testing.T, rs *labkit.Regserver) (string, *relay) {
	t.Helper()
	if l.netem {
		return rs.URL("lab-token"), nil
	}
	t.Logf("no tc netem here (%v): using the userspace relay", l.noNetem)
	r := l.startRelay(t)
	return r.base + "/elemental/registration/lab-token", r
}

// impairment names what ran, for the one-line summary of a test, and checks
// that the relay, when it ran, carried the agent's connections.
func (l *lab) impairment(t *testing.T, r *relay) string {
	if r == nil {
		return "impairment=netem (" + netemArgs + ", both veth ends)"
	}
	conns, segs, lost := r.stop(t)
	if conns == 0 || segs == 0 {
		t.Errorf("the agent's traffic did not go through the relay (%d connections, %d segments)", conns, segs)
	}
	return fmt.Sprintf("impairment=userspace relay (delay %s each way, loss %s, rto %s, seed %d): %d connections, %d segments, %d lost",
		relayDelay, relayLoss, relayRTO, relaySeed, conns, segs, lost)
}

type agentRun struct {
	out  string
	code int
	err  error // the agent could not be run at all
}

// runAgent runs bin/nodereg-agent in the node namespace against the machine root.
func (l *lab) runAgent(t *testing.T, m *node.Machine) agentRun {
	return l.agentCommand(t, m)(nil)
}

// agentCommand builds what the agent needs on the test's goroutine and
// returns the run itself, which may go on another goroutine (nothing in it
// calls t.Fatal). started, if not nil, is closed once the agent started
// (or failed to).
func (l *lab) agentCommand(t *testing.T, m *node.Machine) func(started chan<- struct{}) agentRun {
	bin := testbin.Build(t, "./cmd/agent")
	stub := testbin.NmstatectlStub(t)
	return func(started chan<- struct{}) agentRun {
		signalled := started == nil
		signal := func() {
			if !signalled {
				signalled = true
				close(started)
			}
		}
		defer signal()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		argv := labkit.InNS(l.node, bin, "--root", m.Root, "--apply-live", "--debug", "--deadline", "90s", "--network-timeout", "90s")
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), host.EnvNmstatectl+"="+stub)
		cmd.Env = append(cmd.Env, m.Stub().Env()...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return agentRun{err: err}
		}
		signal()
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			return agentRun{out: out.String(), code: ee.ExitCode()}
		}
		return agentRun{out: out.String(), err: err}
	}
}

func checkRegistered(t *testing.T, m *node.Machine, r agentRun) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("agent: %v", r.err)
	}
	if r.code != 0 {
		t.Fatalf("agent exit %d:\n%s", r.code, r.out)
	}
	st, note, err := state.Load(host.Root("/"), filepath.Join(m.Root, node.StatePath))
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
	t.Parallel()
	l := newLab(t, netemArgs)
	dir := t.TempDir()
	rs := l.startServer(t, dir)
	url, rl := l.impair(t, rs)
	m := node.New(t, "52:54:00:0d:00:01", url, "")
	start := time.Now()
	r := l.runAgent(t, m)
	took := time.Since(start).Round(time.Millisecond)
	checkRegistered(t, m, r)
	if !strings.Contains(r.out, "192.168.122.150") {
		t.Errorf("agent output does not show the address it got:\n%s", r.out)
	}
	t.Logf("bad network: registration + network config completed in %v, %d retries; %s", took, strings.Count(r.out, "retrying in"), l.impairment(t, rl))
}

// TestServerKilledMidRun: the server is SIGKILLed once it has registered
// the machine, while the agent waits for its address (the server holds
// every new address back 3 s), and restarted on the same store and address;
// the agent completes on retry within its deadline with the address the
// server claimed before it died.
func TestServerKilledMidRun(t *testing.T) {
	t.Parallel()
	l := newLab(t, netemArgs)
	dir := t.TempDir()
	const delay = "--allocation-delay=3s"
	rs := l.startServer(t, dir, delay)
	url, rl := l.impair(t, rs)
	m := node.New(t, "52:54:00:0d:00:02", url, "")
	start := time.Now()
	started := make(chan struct{})
	done := make(chan agentRun, 1)
	run := l.agentCommand(t, m)
	go func() { done <- run(started) }()
	<-started
	waitFor(t, rs, "registered")
	// Killed while the agent waits for its address, restarted at once:
	// the agent's next attempt meets either the dead server or the new
	// one, and in both cases must end with the claim made before the kill.
	rs.Kill()
	l.startServer(t, dir, delay)
	r := <-done
	took := time.Since(start).Round(time.Millisecond)
	checkRegistered(t, m, r)
	if !strings.Contains(r.out, "192.168.122.150") {
		t.Errorf("agent did not get the first pool address:\n%s", r.out)
	}
	if !strings.Contains(r.out, "retrying in") {
		t.Errorf("the kill did not cost the agent an attempt (no retry logged):\n%s", r.out)
	}
	t.Logf("server killed: completed in %v, %d retries; %s", took, strings.Count(r.out, "retrying in"), l.impairment(t, rl))
}

// waitFor polls the server's log until it shows one of the markers.
func waitFor(t *testing.T, rs *labkit.Regserver, markers ...string) {
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
