// Package cli_test runs the built agent binary as an operator would: its
// command line, exit statuses and log output, against regserver on loopback.
package cli_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// cliConfig is one registration (token cli-token, auth mac) with no
// network config.
const cliConfig = "registrations:\n- name: cli\n  token: cli-token\n  config:\n    elemental:\n      registration:\n        auth: mac\n"

// regserverWith starts the reference server on loopback with the config
// (YAML, written to a file of the test's) and the extra flags; MsgGet does
// not wait for addresses.
func regserverWith(t *testing.T, config string, flags ...string) *labkit.Regserver {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(config), 0o600))
	args := append([]string{"--config", cfg, "--listen", "127.0.0.1:0", "--network-wait", "0"}, flags...)
	return labkit.StartRegserver(t, args...)
}

// regserver serves cliConfig, PLAIN authentication only.
func regserver(t *testing.T) *labkit.Regserver { return regserverWith(t, cliConfig, "--no-tpm") }

type result struct {
	code           int
	stdout, stderr string
}

// agent runs the built binary (as name, through a symlink, when name is
// not "agent").
func agent(t *testing.T, name string, env []string, args ...string) result {
	t.Helper()
	bin := testbin.Build(t, "./cmd/agent")
	if name != "agent" {
		link := filepath.Join(t.TempDir(), name)
		node.Must(t, os.Symlink(bin, link))
		bin = link
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var r result
	r.code, r.stdout, r.stderr = testutil.Run(t, cmd)
	return r
}

func TestWrongTokenExits78AfterOneAttempt(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:01", rs.URL("wrong-token"), "")
	r := agent(t, "agent", nil, "--root", m.Root, "--deadline", "10m")
	if r.code != 78 {
		t.Fatalf("exit %d, want 78\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "retrying in") {
		t.Errorf("a 404 was retried:\n%s", r.stderr)
	}
	// The error once (the phase's failure line), then the verdict.
	if n := strings.Count(r.stderr, "404 Not Found"); n != 1 {
		t.Errorf("the error is printed %d times:\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stderr, `msg="server refused the upgrade: not registered: needs a person" exit=78 phase=register`) {
		t.Errorf("no verdict line:\n%s", r.stderr)
	}
}

func TestUnreadableOrInvalidCAExits78WithoutRetrying(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:02", rs.URL("cli-token"), "")
	garbage := filepath.Join(m.Root, "garbage.pem")
	node.Must(t, os.WriteFile(garbage, []byte("not PEM\n"), 0o644))
	for _, ca := range []string{"/nonexistent/ca.pem", "/garbage.pem"} {
		r := agent(t, "agent", nil, "--root", m.Root, "--deadline", "10m", "--registration-ca-cert", ca)
		if r.code != 78 || !strings.Contains(r.stderr, "--registration-ca-cert") || strings.Contains(r.stderr, "retrying in") {
			t.Errorf("--registration-ca-cert %s: exit %d, want 78 naming the flag, no retries\n%s", ca, r.code, r.stderr)
		}
	}
}

// A server that drops every connection keeps the agent retrying; SIGINT
// and SIGTERM during the wait end it with 130 and 143, a line saying so,
// and no error line.
func TestSignalsExit130And143(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	node.Must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	bin := testbin.Build(t, "./cmd/agent")
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		line string
	}{{syscall.SIGINT, 130, "stopped by SIGINT"}, {syscall.SIGTERM, 143, "stopped by SIGTERM"}} {
		m := node.New(t, "52:54:00:00:0e:03", "http://"+l.Addr().String()+"/elemental/registration/t", "")
		cmd := exec.Command(bin, "--root", m.Root, "--deadline", "10m")
		stderr, err := cmd.StderrPipe()
		node.Must(t, err)
		node.Must(t, cmd.Start())
		// Signal once the agent says it waits before its next attempt.
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "retrying in") {
				if !strings.Contains(sc.Text(), "retrying until the 10m0s deadline") {
					t.Errorf("the first retry line does not say the deadline: %s", sc.Text())
				}
				break
			}
		}
		node.Must(t, cmd.Process.Signal(c.sig))
		rest, _ := io.ReadAll(stderr)
		log.Write(rest)
		_ = cmd.Wait()
		if got := cmd.ProcessState.ExitCode(); got != c.code || !strings.Contains(log.String(), c.line) {
			t.Errorf("%s: exit %d, want %d with %q\n%s", c.sig, got, c.code, c.line, log.String())
		}
		if strings.Contains(string(rest), "level=error") {
			t.Errorf("%s reported as a failure:\n%s", c.sig, log.String())
		}
	}
}

func TestDryRunSaysItRegistersAndWritesNothing(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:04", rs.URL("cli-token"), "")
	before := node.Files(t, m.Root)
	r := agent(t, "agent", nil, "--root", m.Root, "--dry-run", "--log-format", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	var first map[string]any
	node.Must(t, json.Unmarshal([]byte(lines[0]), &first))
	if msg, _ := first["msg"].(string); !strings.Contains(msg, "registers with the server for real") || !strings.Contains(msg, "writes and applies nothing on this node") {
		t.Errorf("first line %q does not say the dry run registers for real", lines[0])
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("--log-format json printed a non-JSON line: %q", l)
		}
	}
	if changed := node.Changed(before, node.Files(t, m.Root)); len(changed) != 0 {
		t.Errorf("dry run changed %v", changed)
	}
}

// Installed as elemental-register, every flag and command of upstream's
// (docs/protocol.md §8.1) is accepted.
func TestElementalRegisterKeepsUpstreamFlags(t *testing.T) {
	upstream := []string{
		"--registration-url", "https://reg.example/elemental/registration/x", "--registration-ca-cert", "/etc/ca.pem",
		"--emulate-tpm", "--emulated-tpm-seed", "-1", "--no-smbios", "--auth", "sys-uuid", "-d", "--debug",
		"--config-path", "/oem/registration/config.yaml", "--state-path", "/oem/registration/state.yaml",
		"--install", "--no-toolkit", "--disable-boot-entry", "--label", "a=b", "--label", "c=d,e=f",
		"--local-labels-file", "/etc/elemental/labels.yaml",
	}
	for _, args := range [][]string{
		append(upstream, "--help"),
		{"--reset", "--help"},
		{"--reset-network", "--help"},
		{"dumpdata", "--help"},
		{"dump", "hostinfo", "-r", "-f", "json", "--help"},
		{"dumpdata", "smbios", "--raw", "--format", "yaml", "--help"},
	} {
		r := agent(t, "elemental-register", nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:\n  elemental-register") {
			t.Errorf("%q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{"-v"}, {"--version"}, {"version"}} {
		if r := agent(t, "elemental-register", nil, args...); r.code != 0 || strings.TrimSpace(r.stdout) == "" {
			t.Errorf("%q: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	// And a real registration with upstream's flags only.
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:05", "http://unused.invalid/", "")
	node.Must(t, os.MkdirAll(filepath.Join(m.Root, "etc/elemental"), 0o755))
	node.Must(t, os.WriteFile(filepath.Join(m.Root, "etc/elemental/labels.yaml"), []byte("rack: r1\n"), 0o644))
	r := agent(t, "elemental-register", nil, "--root", m.Root,
		"--registration-url", rs.URL("cli-token"), "--auth", "mac", "-d", "--no-smbios",
		"--config-path", "/oem/registration/config.yaml", "--state-path", "/var/state.yaml",
		"--label", "a=b", "--local-labels-file", "/etc/elemental/labels.yaml")
	if r.code != 0 {
		t.Fatalf("registration as elemental-register: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(m.Root, "var/state.yaml")); err != nil {
		t.Errorf("state not written at --state-path: %v", err)
	}
}

func TestInventoryFormats(t *testing.T) {
	m := node.New(t, "52:54:00:00:0e:06", "http://unused.invalid/", "")
	r := agent(t, "agent", nil, "inventory", "--root", m.Root, "--label", "a=b")
	var doc map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc["labels"].(map[string]any)["a"] != "b" {
		t.Fatalf("json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = agent(t, "agent", nil, "dumpdata", "hostinfo", "-f", "json-compact", "--root", m.Root)
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !json.Valid([]byte(r.stdout)) {
		t.Errorf("json-compact: exit %d: %q", r.code, r.stdout)
	}
	r = agent(t, "agent", nil, "inventory", "--format", "yaml", "--root", m.Root, "--label", "n=007")
	var y map[string]any
	if r.code != 0 || yaml.Unmarshal([]byte(r.stdout), &y) != nil || json.Valid([]byte(r.stdout)) {
		t.Fatalf("yaml: exit %d\n%s", r.code, r.stdout)
	}
	if y["labels"].(map[string]any)["n"] != "007" || y["smbios"] == nil {
		t.Errorf("yaml lost data: %v", y["labels"])
	}
	r = agent(t, "elemental-register", nil, "dumpdata", "-f", "labels", "--root", m.Root, "--label", "n=007,rack=r1")
	var labels map[string]string
	if r.code != 0 || yaml.Unmarshal([]byte(r.stdout), &labels) != nil || labels["n"] != "007" || labels["rack"] != "r1" || len(labels) != 2 {
		t.Errorf("labels: exit %d\n%s", r.code, r.stdout)
	}
}

func TestInstallHonoursExplicitConfigPath(t *testing.T) {
	m := node.New(t, "52:54:00:00:0e:07", "http://unused.invalid/", "")
	r := agent(t, "agent", nil, "--root", m.Root, "--install", "--config-path", "/etc/mine.yaml")
	if r.code != 78 || !strings.Contains(r.stderr, filepath.Join(m.Root, "etc/mine.yaml")) || !strings.Contains(r.stderr, "given with --config-path") {
		t.Errorf("explicit: exit %d\n%s", r.code, r.stderr)
	}
	r = agent(t, "agent", nil, "--root", m.Root, "--install")
	if r.code != 78 || !strings.Contains(r.stderr, "livecd-cloud-config.yaml") {
		t.Errorf("default: exit %d\n%s", r.code, r.stderr)
	}
}

// At the default level: no phase start lines, one result line per phase,
// and a first boot's missing state file is not a warning.
func TestDefaultLogIsOneLinePerPhaseResult(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:08", rs.URL("cli-token"), "")
	r := agent(t, "agent", []string{"NO_COLOR=1"}, "--root", m.Root)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "[started]") {
		t.Errorf("phase start lines at the default level:\n%s", r.stderr)
	}
	for _, phase := range []string{"config", "state", "identity", "bootstrap", "register", "fetch-network", "plan", "apply", "finish"} {
		found := 0
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.Contains(l, `msg="[finished]"`) && strings.HasSuffix(l, "phase="+phase) {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%d result lines for phase %s, want 1:\n%s", found, phase, r.stderr)
		}
	}
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "no state file") && !strings.Contains(l, "level=info") {
			t.Errorf("first boot's missing state file logged as %q", l)
		}
	}
	if strings.Contains(r.stderr, "\x1b[") {
		t.Errorf("colour with NO_COLOR set")
	}
	if !strings.Contains(r.stderr, `msg="registration complete"`) {
		t.Errorf("no outcome line:\n%s", r.stderr)
	}
}

func TestConfigKeyTyposAreWarnedAbout(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:0a", rs.URL("cli-token"), "    netwrk-config: explicit\n")
	r := agent(t, "agent", nil, "--root", m.Root, "--dry-run")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	want := "unknown key elemental.registration.netwrk-config: ignored (did you mean elemental.registration.network-config?)"
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, filepath.Join(m.Root, node.ConfigPath)) {
		t.Errorf("no warning %q naming the file:\n%s", want, r.stderr)
	}
}

// --debug tells the conversation step by step without the token, and
// keeps ghw's own messages out unless --debug=all.
func TestDebugShowsTheConversationAndNotGHW(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:0b", rs.URL("cli-token"), "")
	// A logical processor without its /proc/cpuinfo entry: ghw, which
	// still reads the CPU family, warns about it. The families the agent
	// decodes itself from the run's snapshot say nothing through ghw.
	node.Must(t, os.MkdirAll(filepath.Join(m.Root, "sys/devices/system/cpu/cpu0"), 0o755))
	r := agent(t, "agent", nil, "--root", m.Root, "--dry-run", "--debug")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		`msg="connected: authenticated, protocol version negotiated"`, "version=12", "/elemental/registration/REDACTED",
		`msg="sending MsgSmbios, MsgSystemData, MsgAnnotations, MsgLabels, then MsgGet"`, `msg="received MsgConfig"`,
		`msg="network config: asking with MsgNetworkConfig`, `msg="received MsgNetworkConfig"`, `msg="[started]"`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--debug lacks %q", want)
		}
	}
	if strings.Contains(r.stderr, "source=ghw") {
		t.Errorf("--debug shows ghw's messages:\n%s", r.stderr)
	}
	all := agent(t, "agent", nil, "--root", m.Root, "--dry-run", "--debug=all")
	if all.code != 0 || !strings.Contains(all.stderr, "source=ghw") {
		t.Errorf("--debug=all: exit %d, no ghw message (ghw's CPU module warns about cpu0)\n%s", all.code, all.stderr)
	}
}
