package hostile

// The cases of docs/reliability.md's "Hostile server" that run the whole agent against a hostile input:
// server-sent local fields (KeepLocal), a tpm-device that is not a device
// (devnode.CheckTPM), a FIFO at each owned path (safefile), a corrupt
// manifest set aside, the hard deadlines, nothing printed after the final
// line, and the token never printed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
)

// inTime runs fn and fails the test if it has not returned after limit: a
// run blocked on a FIFO would otherwise hold the test until go test's own
// timeout.
func inTime[T any](t *testing.T, limit time.Duration, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(limit):
		t.Fatalf("still running after %s", limit)
		panic("unreachable")
	}
}

type runOutcome struct {
	res *agent.Result
	err error
}

// TestServerSentLocalFieldsIgnored: the server names a FIFO as CA file, a
// disk as TPM, plain http as next URL and another network mode; the run
// warns about each, keeps the local values (the explicit exchange still
// uses the local CA over https) and applies the network config.
func TestServerSentLocalFieldsIgnored(t *testing.T) {
	useStub(t)
	fifo := filepath.Join(t.TempDir(), "ca.pem")
	testutil.Must(t, syscall.Mkfifo(fifo, 0o600))
	s := &Server{Network: []byte(seedPRNetwork)}
	url, ca := s.Start(t, true, "tok-local-fields")
	s.Config = []byte("elemental:\n    registration:\n        url: " + strings.Replace(url, "https://", "http://", 1) +
		"\n        ca-cert: " + fifo + "\n        tpm-device: /dev/sda\n        network-config: embedded\n        auth: mac\n")
	m := node.New(t, "52:54:00:0c:01:01", url, "    network-config: explicit\n    ca-cert: |\n      "+strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n      ")+"\n")
	var log node.Log
	out := inTime(t, 30*time.Second, func() runOutcome {
		res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second})
		return runOutcome{res, err}
	})
	if out.err != nil || !out.res.Applied {
		t.Fatalf("%+v %v\n%s", out.res, out.err, log.String())
	}
	for _, key := range []string{"url", "ca-cert", "tpm-device", "network-config"} {
		if !strings.Contains(log.String(), "elemental.registration."+key+" is ignored") {
			t.Errorf("no warning about the server's %s:\n%s", key, log.String())
		}
	}
}

// TestTPMDeviceMustBeADevice: a tpm-device that is a regular file, a FIFO
// or a socket path that is a file is refused as configuration (exit 78)
// before anything is written to it.
func TestTPMDeviceMustBeADevice(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "disk.img")
	testutil.Must(t, os.WriteFile(file, nil, 0o600))
	fifo := filepath.Join(dir, "fifo")
	testutil.Must(t, syscall.Mkfifo(fifo, 0o600))
	// A block device node with no driver behind it (major 240 is for
	// local experiments): refused before it is opened, and nothing can
	// be written through it if it were.
	blk := filepath.Join(dir, "blk")
	testutil.Must(t, syscall.Mknod(blk, syscall.S_IFBLK|0o600, 240<<8))
	for _, dev := range []string{blk, file, fifo, "unix://" + file} {
		m := node.New(t, "52:54:00:0c:02:01", "http://127.0.0.1:1/elemental/registration/tok", "")
		m.WriteConfig("elemental:\n  registration:\n    url: http://127.0.0.1:1/elemental/registration/tok\n    auth: tpm\n    tpm-device: " + dev + "\n")
		var log node.Log
		out := inTime(t, 30*time.Second, func() runOutcome {
			res, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: time.Second})
			return runOutcome{res, err}
		})
		if exitcode.Of(out.err) != exitcode.Config || !strings.Contains(fmt.Sprint(out.err), "not a TPM device") {
			t.Errorf("%s: %v (exit %d)", dev, out.err, exitcode.Of(out.err))
		}
		if b, _ := os.ReadFile(file); len(b) > 0 {
			t.Fatalf("%s: %d bytes written into the file", dev, len(b))
		}
	}
}

// manifestPath and readManifest look at what a good run left.
func manifestPath(m *node.Machine) string {
	return filepath.Join(m.Root, host.StateDir, "network-manifest.json")
}

func ownedFiles(t *testing.T, m *node.Machine) []string {
	b, err := os.ReadFile(manifestPath(m))
	testutil.Must(t, err)
	var man state.Manifest
	testutil.Must(t, json.Unmarshal(b, &man))
	var out []string
	for _, f := range man.Files {
		out = append(out, filepath.Join(m.Root, f.Path))
	}
	return out
}

// goodRun registers m once against s and applies its network config.
func goodRun(t *testing.T, m *node.Machine) {
	t.Helper()
	var log node.Log
	if _, err := runAgent(t.Context(), m, &log, agent.Options{Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("good run: %v\n%s", err, log.String())
	}
}

// TestCorruptManifestSetAside: a corrupt network manifest is kept aside
// with a warning naming it; the run goes on, and --reset-network still
// removes the applicator and the files it names.
func TestCorruptManifestSetAside(t *testing.T) {
	useStub(t)
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok-manifest")
	m := node.New(t, "52:54:00:0c:03:01", url, "    network-config: explicit\n")
	goodRun(t, m)
	// reset-network has NetworkManager reload; there is none here. (Set
	// after the apply, which asks NetworkManager for its profiles: a true
	// that lists none is not one.)
	t.Setenv(host.EnvNmcli, "/bin/true")
	owned := ownedFiles(t, m)
	testutil.Must(t, os.WriteFile(manifestPath(m), []byte("{not json"), 0o600))

	// A dry run warns and lists what would go, and keeps the file as it is.
	var dry node.Log
	if err := agent.ResetNetwork(t.Context(), agent.Options{Root: m.Root, Out: &dry, Log: dry.Entry(), Runner: m.Runner(), DryRun: true}); err != nil {
		t.Fatalf("dry reset-network with a corrupt manifest: %v\n%s", err, dry.String())
	}
	if b, _ := os.ReadFile(manifestPath(m)); string(b) != "{not json" || !strings.Contains(dry.String(), "would remove") {
		t.Errorf("dry run: manifest now %q, output:\n%s", b, dry.String())
	}
	if aside, _ := filepath.Glob(manifestPath(m) + ".corrupt-*"); len(aside) != 0 {
		t.Errorf("a dry run set the manifest aside: %v", aside)
	}

	var log node.Log
	err := agent.ResetNetwork(t.Context(), agent.Options{Root: m.Root, Out: &log, Log: log.Entry(), Runner: m.Runner()})
	if err != nil {
		t.Fatalf("reset-network with a corrupt manifest: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "network-manifest.json") || !strings.Contains(log.String(), "level=warning") {
		t.Errorf("no warning naming the manifest:\n%s", log.String())
	}
	for _, p := range owned {
		if _, err := os.Lstat(p); err == nil && !strings.HasSuffix(p, ".nmstate") && !strings.Contains(p, "network-config.") {
			t.Errorf("%s still there after reset-network", p)
		}
	}
	aside, _ := filepath.Glob(manifestPath(m) + ".corrupt-*")
	if len(aside) != 1 {
		t.Errorf("corrupt manifest not kept aside: %v", aside)
	}

	// And a boot run with a corrupt manifest applies again.
	testutil.Must(t, os.WriteFile(manifestPath(m), []byte("{not json"), 0o600))
	t.Setenv(host.EnvNmcli, "")
	goodRun(t, m)
}

// TestDryRunLeavesCorruptStateInPlace: a dry run writes nothing on the
// node, and that includes keeping a corrupt state file aside; it says what
// a real run would do instead.
func TestDryRunLeavesCorruptStateInPlace(t *testing.T) {
	useStub(t)
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok-dry-state")
	m := node.New(t, "52:54:00:0c:03:02", url, "    network-config: explicit\n")
	state := filepath.Join(m.Root, node.StatePath)
	testutil.Must(t, os.MkdirAll(filepath.Dir(state), 0o700))
	testutil.Must(t, os.WriteFile(state, []byte("{not: [yaml"), 0o600))

	var out, log node.Log
	if _, err := agent.Run(t.Context(), agent.Options{Root: m.Root, Out: &out, Log: log.Entry(), Runner: m.Runner(), DryRun: true, Deadline: 5 * time.Second, NetworkTimeout: 5 * time.Second}); err != nil {
		t.Fatalf("dry run with a corrupt state: %v\n%s", err, log.String())
	}
	if b, _ := os.ReadFile(state); string(b) != "{not: [yaml" {
		t.Errorf("a dry run changed the corrupt state file: now %q", b)
	}
	if aside, _ := filepath.Glob(state + ".corrupt-*"); len(aside) != 0 {
		t.Errorf("a dry run kept the state aside: %v", aside)
	}
	if !strings.Contains(out.String(), "would keep "+state+" aside") {
		t.Errorf("the dry run does not say it would keep the state aside:\n%s\n%s", out.String(), log.String())
	}
}

// TestDeadlineIsAHardBound: against a server silent at any step, the run
// ends within --deadline (registration) or --network-timeout (explicit
// exchange) plus 1 s, whatever the session deadline.
func TestDeadlineIsAHardBound(t *testing.T) {
	// Parallel: every case waits out its bound on a server of its own.
	t.Parallel()
	const bound = 3 * time.Second
	for _, silence := range []Silence{SilentTCP, SilentUpgrade, SilentVersion, SilentConfig, SilentExplicit} {
		t.Run(string(silence), func(t *testing.T) {
			t.Parallel()
			s := &Server{Silence: silence, Config: []byte("elemental:\n    registration:\n        auth: mac\nexplicitNetworkConfig: true\n")}
			url, _ := s.Start(t, false, "tok-deadline")
			m := node.New(t, "52:54:00:0c:04:01", url, "    network-config: explicit\n")
			var log node.Log
			o := agent.Options{Deadline: bound, NetworkTimeout: bound, SessionDeadline: time.Minute}
			start := time.Now()
			var took time.Duration
			out := inTime(t, 3*time.Minute, func() runOutcome {
				res, err := runAgent(t.Context(), m, &log, o)
				took = time.Since(start)
				return runOutcome{res, err}
			})
			if out.err == nil {
				t.Fatal("a silent server let the run succeed")
			}
			// Without the bound the run would end at the session deadline
			// (1 min) or never; any limit well below that shows the bound
			// ended it, and the slack keeps a loaded machine from failing
			// it. The explicit exchange comes after a registration that
			// succeeded at once: both bounds may add up there.
			limit := bound + 20*time.Second
			if silence == SilentExplicit {
				limit = 2*bound + 20*time.Second
			}
			if took > limit {
				t.Errorf("run took %s, the bound is %s: %v", took.Round(time.Millisecond), limit, out.err)
			}
			t.Logf("%s: %v", took.Round(time.Millisecond), out.err)
		})
	}
}

// TestNothingAfterTheFinalLine: a run that fails while the inventory is
// still being collected prints nothing once it has returned, not even when
// its context is cancelled afterwards, as cmd/agent's is at exit: the
// collection was awaited or cancelled before Run returned.
func TestNothingAfterTheFinalLine(t *testing.T) {
	// Parallel: it mostly waits, to see whether anything prints late; so
	// do its ten runs, each on a machine of its own, all at once.
	t.Parallel()
	for i := range 10 {
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			t.Parallel()
			m := node.New(t, "52:54:00:0c:05:01", "http://127.0.0.1:1/elemental/registration/tok", "")
			// The identity phase fails at once, long before any inventory
			// module is done.
			m.WriteConfig("elemental:\n  registration:\n    url: http://127.0.0.1:1/elemental/registration/tok\n    auth: tpm\n    tpm-device: unix:///nonexistent/swtpm.sock\n")
			var log node.Log
			ctx, cancel := context.WithCancel(t.Context())
			_, err := runAgent(ctx, m, &log, agent.Options{Deadline: time.Second})
			at := log.String()
			cancel()
			if err == nil {
				t.Fatal("a run with no TPM succeeded")
			}
			time.Sleep(500 * time.Millisecond)
			if after := strings.TrimPrefix(log.String(), at); after != "" {
				t.Fatalf("run %d: printed after it returned:\n%s", i, after)
			}
		})
	}
}

// TestFIFOAtOwnedPaths: a FIFO, a symlink to a FIFO or a symlink to a file
// of someone else planted at each path the agent reads or replaces neither
// blocks the real binary, nor is followed, nor outlives SIGTERM: the run
// ends with an error naming the path, or within 10 s of SIGTERM; the
// symlink's target is never written.
func TestFIFOAtOwnedPaths(t *testing.T) {
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	bin := testbin.Build(t, "./cmd/agent")
	useStub(t)
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok-fifo")
	m := node.New(t, "52:54:00:0c:07:01", url, "    network-config: explicit\n")
	goodRun(t, m)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	testutil.Must(t, os.WriteFile(victim, []byte("not the agent's\n"), 0o600))
	farFIFO := filepath.Join(outside, "fifo")
	testutil.Must(t, syscall.Mkfifo(farFIFO, 0o600))
	plants := map[string]func(p string) error{
		"fifo":         func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"link-to-fifo": func(p string) error { return os.Symlink(farFIFO, p) },
		"link-to-file": func(p string) error { return os.Symlink(victim, p) },
	}
	paths := append([]string{filepath.Join(m.Root, node.StatePath), manifestPath(m)}, ownedFiles(t, m)...)
	next := 11
	for _, p := range paths {
		for kind, plant := range plants {
			t.Run(filepath.Base(p)+"/"+kind, func(t *testing.T) {
				saved, err := os.ReadFile(p)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				os.Remove(p)
				testutil.Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				testutil.Must(t, plant(p))
				defer func() {
					os.Remove(p)
					if saved != nil {
						os.WriteFile(p, saved, 0o600)
					}
				}()
				// Another address each time, so the run has something to
				// write.
				next++
				s.SetNetwork(bytes.ReplaceAll([]byte(seedPRNetwork), []byte("192.168.122.10"), []byte(fmt.Sprintf("192.168.122.%d", next))))
				out, err, stopped := runUntilSIGTERM(t, bin, stub, m, 5*time.Second, nil, "--deadline", "20s", "--network-timeout", "20s")
				if !stopped && err != nil && !(strings.Contains(out, p) && (strings.Contains(out, "not a regular file") || strings.Contains(out, "symbolic link"))) {
					t.Errorf("ended with %v without naming the %s at %s:\n%s", err, kind, p, out)
				}
				if b, _ := os.ReadFile(victim); string(b) != "not the agent's\n" {
					t.Fatalf("the symlink at %s was followed: its target now holds %q", p, b)
				}
				if fi, err := os.Lstat(farFIFO); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
					t.Fatalf("the FIFO the symlink at %s points to is gone or replaced: %v", p, err)
				}
				t.Logf("stopped by SIGTERM: %v; exit: %v", stopped, err)
			})
		}
	}
	// A run that cannot end by itself (the server never answers and the
	// deadline is far) still ends within 10 s of SIGTERM.
	t.Run("silent-server", func(t *testing.T) {
		silent := &Server{Silence: SilentConfig, Config: s.Config}
		url, _ := silent.Start(t, false, "tok-fifo")
		m := node.New(t, "52:54:00:0c:07:02", url, "")
		// SIGTERM once the agent waits on the silent server (2 s at most).
		out, _, stopped := runUntilSIGTERM(t, bin, stub, m, 2*time.Second, silent.FellSilent(), "--deadline", "5m", "--network-timeout", "5m")
		if !stopped {
			t.Fatalf("a run against a silent server with a 5 min deadline ended by itself:\n%s", out)
		}
	})
}

// runUntilSIGTERM runs the agent binary on m; if it has not ended after
// grace, or once ready is closed (nil: never), it gets SIGTERM, and the
// test fails if it is still running 10 s later. stopped says whether
// SIGTERM was sent.
func runUntilSIGTERM(t *testing.T, bin, stub string, m *node.Machine, grace time.Duration, ready <-chan struct{}, args ...string) (out string, err error, stopped bool) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--root", m.Root, "--auth", "mac"}, args...)...)
	cmd.Env = append(append(os.Environ(), host.EnvNmstatectl+"="+stub), m.Stub().Env()...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	testutil.Must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err, false
	case <-time.After(grace):
	case <-ready:
	}
	testutil.Must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		return buf.String(), err, true
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10 s after SIGTERM:\n%s", buf.String())
	}
	panic("unreachable")
}

// TestTokenNeverPrinted runs the real agent, with no --debug, --debug and
// --debug=all (the libraries' own lines too), against the reference server
// and the hostile one (whose 404 body echoes the token), over http and
// https, with the right and a wrong token, and greps everything either
// printed for the registration token, the system-agent token and the
// cloud-config password.
func TestTokenNeverPrinted(t *testing.T) {
	// Parallel: every agent and server is a process of its own, its tools
	// named in its cmd.Env.
	t.Parallel()
	const (
		saToken  = "SA-TOKEN-hostile-5e1f"
		password = "PASSWORD-hostile-77aa"
		right    = "printed-token"
		wrong    = "WRONG-TOKEN-hostile-0b9c"
	)
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	agentBin := testbin.Build(t, "./cmd/agent")
	dir := t.TempDir()
	cfg := node.ServerConfig{
		Name:      "printed",
		Elemental: "      system-agent:\n        url: https://rancher.invalid/k8s\n        token: " + saToken + "\n",
		Network:   node.AddressOnlyTemplate(24),
		Pool:      "192.168.122.150-192.168.122.160", Prefix: 24, Gateway: "192.168.122.1",
	}.YAML()
	// A cloud-config password next to the elemental block.
	cfg = strings.Replace(cfg, "  network:", "    cloud-config:\n      users: [{name: root, passwd: "+password+"}]\n  network:", 1)
	cfgPath := filepath.Join(dir, "regserver.yaml")
	testutil.Must(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	cert, key, caPEM := serverPKI(t, dir)
	servers := map[string]*labkit.Regserver{
		"http":  labkit.StartRegserver(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--no-tpm", "--network-wait", "0", "--debug"),
		"https": labkit.StartRegserver(t, "--config", cfgPath, "--listen", "127.0.0.1:0", "--no-tpm", "--network-wait", "0", "--debug", "--tls-cert", cert, "--tls-key", key),
	}
	hostile := &Server{Token: "nobody-has-this"}
	hostileURL, hostileCA := hostile.Start(t, true, wrong)
	type target struct{ name, url, ca string }
	var targets []target
	for scheme, rs := range servers {
		targets = append(targets, target{scheme + "-right", rs.URL(right), caPEM}, target{scheme + "-wrong", rs.URL(wrong), caPEM})
	}
	targets = append(targets, target{"hostile-404", hostileURL, string(hostileCA)})
	// A no-toolkit install dry run prints the system-agent files it would
	// write (the system-agent token is in the kubeconfig) and the
	// registration config: both must come out redacted.
	modes := map[string][]string{"run": nil, "dry-install": {"--dry-run", "--install", "--no-toolkit"}}
	for _, tg := range targets {
		for mode, extra := range modes {
			for _, debug := range []string{"", "--debug", "--debug=all"} {
				m := node.New(t, "52:54:00:0c:08:01", tg.url, "")
				// The CA file is read under --root, as on the node.
				testutil.Must(t, os.MkdirAll(filepath.Join(m.Root, "etc"), 0o755))
				testutil.Must(t, os.WriteFile(filepath.Join(m.Root, "etc/ca.pem"), []byte(tg.ca), 0o600))
				args := append([]string{"--root", m.Root, "--auth", "mac", "--registration-ca-cert", "/etc/ca.pem", "--deadline", "3s", "--network-timeout", "3s"}, extra...)
				if debug != "" {
					args = append(args, debug)
				}
				cmd := exec.Command(agentBin, args...)
				cmd.Env = append(append(os.Environ(), host.EnvNmstatectl+"="+stub), m.Stub().Env()...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				err := cmd.Run()
				text := out.String()
				for _, secret := range []string{right, wrong, saToken, password} {
					if strings.Contains(text, secret) {
						t.Errorf("%s %s %q: agent printed %q:\n%s", tg.name, mode, debug, secret, text)
					}
				}
				t.Logf("%s %s %q: exit %v, %d lines", tg.name, mode, debug, err, strings.Count(text, "\n"))
				if tg.name == "https-right" && mode == "dry-install" {
					// The grep above is worth something only if the files
					// holding the secrets were printed.
					if err != nil || !strings.Contains(text, "elemental_connection.json") || !strings.Contains(text, protocol.Redacted) {
						t.Errorf("%s %s %q: exit %v, no redacted system-agent files printed:\n%s", tg.name, mode, debug, err, text)
					}
				}
			}
		}
	}
	for scheme, rs := range servers {
		for _, secret := range []string{right, wrong, saToken, password} {
			if strings.Contains(rs.Stderr.String(), secret) {
				t.Errorf("regserver (%s) printed %q:\n%s", scheme, secret, rs.Stderr.String())
			}
		}
	}
}

// serverPKI writes a CA-signed certificate for 127.0.0.1 and returns the
// cert and key paths and the CA's PEM.
func serverPKI(t *testing.T, dir string) (cert, key, caPEM string) {
	ca := testpki.New(t, "hostile test CA")
	f := ca.WriteFiles(t, dir, "127.0.0.1")
	return f.Cert, f.Key, string(ca.CertPEM())
}
