package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/nmstate"
)

// listener counts the connections made to it: a command line that must not
// start a run must leave it at zero.
func listener(t *testing.T) (url string, conns *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conns = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return "http://" + l.Addr().String() + "/elemental/registration/t", conns
}

// scratchRoot is a node root whose config points at url.
func scratchRoot(t *testing.T, url string) string {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, "oem/registration/config.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("elemental:\n  registration:\n    url: "+url+"\n    auth: mac\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = execute("agent", args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCommandLinesNotUnderstoodExit64WithOneLineAndNoRun(t *testing.T) {
	url, conns := listener(t)
	root := scratchRoot(t, url)
	nc := filepath.Join(t.TempDir(), "nc.yaml")
	if err := os.WriteFile(nc, []byte("configurator: none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		says string // the problem, named
		hint string
	}{
		{[]string{"--dry-run", "somethingelse"}, `unknown command "somethingelse"`, "agent --help"},
		{[]string{"--dry-run", "version"}, "unknown flag: --dry-run", "agent version --help"},
		{[]string{"bogus"}, `unknown command "bogus"`, "agent --help"},
		{[]string{"help", "bogus"}, `unknown help topic "bogus"`, "agent help --help"},
		{[]string{"register", "extra"}, `unexpected argument "extra"`, "agent register --help"},
		{[]string{"version", "extra"}, `unexpected argument "extra"`, "agent version --help"},
		{[]string{"render", "--network-config", nc, "--registration-url", url}, "unknown flag: --registration-url", "agent render --help"},
		{[]string{"render"}, `"input" not set`, "agent render --help"},
		// --bootstrap -f FILE previews the file's bootstrap network: --set
		// then gives the machine's facts, never a pool address.
		{[]string{"render", "-f", nc, "--bootstrap", "--set", "inventory-ip=192.168.122.150"}, `--set "inventory-ip=192.168.122.150": with --bootstrap, --set gives a fact of the machine`, "agent render --help"},
		{[]string{"render", "-f", nc, "--bootstrap", "--set", "mac=nope"}, `"nope" is not an Ethernet MAC address`, "agent render --help"},
		{[]string{"rendr", "-f", nc}, `unknown command "rendr" for "agent"; did you mean render?`, "agent --help"},
		{[]string{"regsiter"}, `unknown command "regsiter" for "agent"; did you mean register?`, "agent --help"},
		{[]string{"--registration-ulr", url}, "unknown flag: --registration-ulr; did you mean --registration-url?", "agent --help"},
		{[]string{"register", "--dry-rn"}, "unknown flag: --dry-rn; did you mean --dry-run?", "agent register --help"},
		{[]string{"completion", "foo"}, `unknown command "foo" for "agent completion"`, "agent completion --help"},
		{[]string{"inventory", "--format", "xml"}, `"xml" is not one of json, json-compact, yaml, labels`, "agent inventory --help"},
		{[]string{"inventory", "-f", "xml"}, `"xml" is not one of`, "agent inventory --help"},
		{[]string{"inventory", "nonsense"}, `invalid argument "nonsense"`, "agent inventory --help"},
		{[]string{"inventory", "--dry-run"}, "unknown flag: --dry-run", "agent inventory --help"},
		{[]string{"--auth", "tmp"}, `"tmp" is not one of tpm, mac, sys-uuid`, "agent --help"},
		{[]string{"--label", "foo"}, `"foo": want key=value`, "agent --help"},
		{[]string{"--label", "a=b,foo"}, `"foo": want key=value`, "agent --help"},
		{[]string{"--network-config", "sometimes"}, `"sometimes" is not one of auto, embedded, explicit`, "agent --help"},
		{[]string{"--nmstate", "gc"}, `"gc" is not one of auto, builtin, nmstatectl`, "agent --help"},
		{[]string{"register", "--nmstate", "rust"}, `"rust" is not one of auto, builtin, nmstatectl`, "agent register --help"},
		{[]string{"render", "--network-config", nc, "--nmstate", "rust"}, `"rust" is not one of auto, builtin, nmstatectl`, "agent render --help"},
		{[]string{"--tpm-device", "tpm0"}, "neither a device path nor unix:///path", "agent --help"},
		{[]string{"--deadline", "soon"}, `invalid argument "soon" for "--deadline"`, "agent --help"},
		{[]string{"--log-format", "xml"}, `"xml" is not one of text, json, journal`, "agent --help"},
		{[]string{"--debug=loud"}, `"loud" is not true, false or all`, "agent --help"},
		{[]string{"--install", "--reset"}, "--install and --reset are mutually exclusive", "agent --help"},
		{[]string{"--root", "/nonexistent/root"}, "--root /nonexistent/root: not a directory", "agent --help"},
		{[]string{"inventory", "--root", "/nonexistent/root"}, "--root /nonexistent/root: not a directory", "agent inventory --help"},
		{[]string{"--reset", "--reset-network"}, "--reset and --reset-network are mutually exclusive", "agent --help"},
	} {
		args := append([]string{"--root", root}, c.args...)
		code, stdout, stderr := run(args...)
		if code != 64 {
			t.Errorf("%q: exit %d, want 64\nstderr: %s", c.args, code, stderr)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if len(lines) != 1 || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "'"+c.hint+"'") {
			t.Errorf("%q: stderr %q, want one line naming %q with the hint '%s'", c.args, stderr, c.says, c.hint)
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q", c.args, stdout)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to the registration server: a refused command line started a run", n)
	}
}

// Help is cobra's: on stdout, exit 0, with the sections elemental-register
// users know; each command lists only the flags that mean something there.
func TestHelpOnStdout(t *testing.T) {
	for _, c := range []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"--help"}, []string{"Usage:", "agent [register] [flags]", "Available Commands:", "register", "render", "inventory", "version", "completion", "help", "Flags:", "--registration-url", "--root", "(default auto)", "Exit status: 0 done, 64 bad command line, 75 try again later, 78 needs a"}, nil},
		{[]string{"help"}, []string{"Usage:", "Available Commands:"}, nil},
		{[]string{"help", "render"}, []string{"agent render --input FILE"}, nil},
		{[]string{"register", "--help"}, []string{"--registration-url", "--dry-run", "Global Flags:", "--root"}, []string{"Available Commands:"}},
		{[]string{"render", "--help"}, []string{"-f, --input string", "Global Flags:"}, []string{"--registration-url", "--dry-run", "--network-config"}},
		{[]string{"inventory", "--help"}, []string{"Aliases:", "dumpdata", "-f, --format", "--local-labels-file"}, []string{"--registration-url", "--dry-run", "--install", "--deadline"}},
		{[]string{"dumpdata", "--help"}, []string{"agent inventory [hostinfo|legacy|smbios]"}, nil},
		{[]string{"completion", "bash"}, []string{"bash completion"}, nil},
	} {
		code, stdout, stderr := run(c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%q: stdout lacks %q", c.args, w)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(stdout, w) {
				t.Errorf("%q: stdout has %q, which means nothing there", c.args, w)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		code, stdout, _ := run(args...)
		if code != 0 || stdout != version+"\n" {
			t.Errorf("%q: exit %d, stdout %q", args, code, stdout)
		}
	}
}

func TestRenderRefusesUnknownKeysNamingThem(t *testing.T) {
	nc := filepath.Join(t.TempDir(), "nc.yaml")
	if err := os.WriteFile(nc, []byte("configurator: none\nipAdresses: {a: b}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("render", "--input", nc)
	if code != 78 || !strings.Contains(stderr, "ipAdresses") || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 78 naming ipAdresses", code, stdout, stderr)
	}
	// The expected keys are listed, not only the Go type.
	if !strings.Contains(stderr, "has the keys configurator (") || !strings.Contains(stderr, "ipAddresses (") || !strings.Contains(stderr, "and config (") {
		t.Errorf("stderr %q does not list the NetworkConfig keys", stderr)
	}
	if err := os.WriteFile(nc, []byte("configurator: none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --input, -f and the old, hidden spelling --network-config.
	for _, flag := range []string{"--input", "-f", "--network-config"} {
		if code, _, stderr := run("render", flag, nc); code != 0 {
			t.Fatalf("valid file with %s: exit %d: %s", flag, code, stderr)
		}
	}
}

// render of an nmstate config says what wrote its keyfiles: the built-in
// when asked for, or when nmstatectl is not found (auto); nmstatectl when
// asked for and missing is a config error naming the tool, exit 78 as the
// real run's (docs/cli.md).
func TestRenderNmstateSaysWhichGenerator(t *testing.T) {
	nc := filepath.Join(t.TempDir(), "nc.yaml")
	cfg := strings.ReplaceAll(strings.ReplaceAll(node.NmstateTemplate, "pool-a", "192.168.122.150"), "\n    ", "\n")
	if err := os.WriteFile(nc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODEREG_NMSTATECTL", "/nonexistent/nmstatectl")
	for _, args := range [][]string{{"--nmstate", "builtin"}, nil, {"--nmstate=auto"}} {
		code, stdout, stderr := run(append([]string{"render", "-f", nc}, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		for _, want := range []string{"# keyfiles by the built-in nmstate translator (matches nmstatectl gc of nmstate " + nmstate.MatchedVersion + ")",
			"# ---- keyfile: /etc/NetworkManager/system-connections/enp1s0.nmconnection", "address0=192.168.122.150/24\n", "nmcli connection up uuid"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%q: output lacks %q:\n%s", args, want, stdout)
			}
		}
		if strings.Contains(stdout, "not shown") || strings.Contains(stdout, "nmstatectl apply") {
			t.Errorf("%q: output:\n%s", args, stdout)
		}
	}
	code, stdout, stderr := run("render", "--input", nc, "--nmstate", "nmstatectl")
	if code != 78 || !strings.Contains(stdout, "# keyfiles and applicator not shown: plan network (nmstate): required tool nmstatectl not found") || strings.Contains(stdout, "built-in") {
		t.Errorf("--nmstate nmstatectl without the tool: exit %d, %s%s", code, stdout, stderr)
	}
}

// The root command and `register` share one set of registration flags;
// both must hand what was given to the run.
func TestRootAndRegisterPassTheSameOverrides(t *testing.T) {
	for _, sub := range [][]string{nil, {"register"}} {
		c := &cli{name: "agent"}
		root := c.command()
		args := append(append([]string{}, sub...), "--auth", "mac", "--network-config", "explicit", "--tpm-device", "unix:///s", "--help")
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		cmd, err := root.ExecuteC()
		if err != nil {
			t.Fatal(err)
		}
		reg := c.lastRegister
		o := reg.overrides(cmd.Flags())
		if o.Auth == nil || *o.Auth != "mac" || o.NetworkConfig == nil || *o.NetworkConfig != "explicit" || o.TPMDevice == nil || *o.TPMDevice != "unix:///s" || o.URL != nil {
			t.Errorf("%q: overrides %+v", sub, o)
		}
	}
}

// render --bootstrap prints the bootstrap profile and the first address of
// the machine under --root, and writes nothing; without a bootstrap block
// it says so (exit 78).
func TestRenderBootstrap(t *testing.T) {
	url, conns := listener(t)
	root := scratchRoot(t, url)
	if code, _, stderr := run("--root", root, "render", "--bootstrap"); code != 78 || !strings.Contains(stderr, "elemental.registration.bootstrap-network") {
		t.Errorf("no bootstrap block: exit %d, stderr %q; want 78 naming the key", code, stderr)
	}
	nic := filepath.Join(root, "sys/class/net/eth0")
	for p, v := range map[string]string{"address": "52:54:00:31:00:09\n", "addr_assign_type": "0\n"} {
		testutil.WriteFile(t, nic, p, v, 0o644)
	}
	cfg := "elemental:\n  registration:\n    url: " + url + "\n" + node.BootstrapKeyfile{Key: "bootstrap-eth0", ID: "bootstrap-eth0", Iface: "eth0", Gateway: "10.231.0.1", Sources: `          static:
          - mac: 52:54:00:31:00:09
            address: 10.231.0.29
`}.Block()
	if err := os.WriteFile(filepath.Join(root, "oem/registration/config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("--root", root, "render", "--bootstrap")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"first try 10.231.0.29 from static[0] (mac 52:54:00:31:00:09)", "address1=10.231.0.29/24,10.231.0.1", "nodereg-bootstrap-bootstrap-eth0.nmconnection"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "run")); err == nil {
		t.Error("render --bootstrap created /run under the root")
	}
	if conns.Load() != 0 {
		t.Errorf("render --bootstrap connected to the server %d times", conns.Load())
	}
}

// render --bootstrap chooses an nmstate template's keyfile generator as
// register does: --nmstate, else the file's elemental.registration.nmstate,
// else auto. nmstatectl is missing here, so the built-in shows the keyfile
// and nmstatectl shows none.
func TestRenderBootstrapNmstateChoiceFlagFileAuto(t *testing.T) {
	t.Setenv("NODEREG_NMSTATECTL", "/nonexistent/nmstatectl")
	url, _ := listener(t)
	root := scratchRoot(t, url)
	nic := filepath.Join(root, "sys/class/net/eth0")
	for p, v := range map[string]string{"address": "52:54:00:31:00:09\n", "addr_assign_type": "0\n"} {
		testutil.WriteFile(t, nic, p, v, 0o644)
	}
	const builtin, missing = "# bootstrap keyfiles by the built-in nmstate translator\n", "# bootstrap keyfiles not shown: plan network (nmstate): required tool nmstatectl not found"
	writeConfig := func(nmstate string) {
		t.Helper()
		cfg := "elemental:\n  registration:\n    url: " + url + "\n"
		if nmstate != "" {
			cfg += "    nmstate: " + nmstate + "\n"
		}
		cfg += `    bootstrap-network:
      configurator: nmstate
      config:
        interfaces:
        - name: eth0
          type: ethernet
          state: up
          ipv4: {enabled: true, dhcp: false, address: [{ip: "{boot-ip}", prefix-length: 24}]}
      ipAddresses:
        boot-ip:
          static:
          - mac: 52:54:00:31:00:09
            address: 10.231.0.29
`
		if err := os.WriteFile(filepath.Join(root, "oem/registration/config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		file  string // elemental.registration.nmstate, "" for none
		flags []string
		want  string
	}{
		{"", nil, builtin},
		{"nmstatectl", nil, missing},
		{"builtin", nil, builtin},
		{"nmstatectl", []string{"--nmstate", "builtin"}, builtin},
		{"nmstatectl", []string{"--nmstate=auto"}, builtin},
		{"builtin", []string{"--nmstate", "nmstatectl"}, missing},
	} {
		writeConfig(c.file)
		code, stdout, stderr := run(append([]string{"--root", root, "render", "--bootstrap"}, c.flags...)...)
		if code != 0 {
			t.Fatalf("file %q, flags %q: exit %d: %s", c.file, c.flags, code, stderr)
		}
		if !strings.Contains(stdout, c.want) {
			t.Errorf("file %q, flags %q: output lacks %q:\n%s", c.file, c.flags, c.want, stdout)
		}
		if shown := strings.Contains(stdout, "address0=10.231.0.29/24\n"); shown != (c.want == builtin) {
			t.Errorf("file %q, flags %q: keyfile shown %v:\n%s", c.file, c.flags, shown, stdout)
		}
	}
	writeConfig("rust")
	if code, _, stderr := run("--root", root, "render", "--bootstrap"); code != 78 || !strings.Contains(stderr, "elemental.registration.nmstate") {
		t.Errorf("nmstate: rust in the file: exit %d, stderr %q; want 78 naming the key", code, stderr)
	}
}
