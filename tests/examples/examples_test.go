// Package examples_test keeps examples/ true: every NetworkConfig renders
// with the built agent, regserver starts on every server config, every node
// config registers (--dry-run) against it and gets the config its network
// example shows, and /etc/default/nodereg's arguments are ones the agent
// takes. A change that breaks an example breaks this test.
package examples_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/tpm/tpmtest"
)

func TestMain(m *testing.M) { testbin.Main(m) }

func examples(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testbin.ModuleRoot(), "examples", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/%s: %v", pattern, err)
	}
	return files
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	var r result
	r.code, r.stdout, r.stderr = testutil.Run(t, exec.Command(bin, args...))
	return r
}

// render is `agent render` of one example, with the built-in translator
// (no nmstatectl here, and the output must not depend on the host).
func render(t *testing.T, file string) result {
	t.Helper()
	return run(t, testbin.Build(t, "./cmd/agent"), "render", "--input", file, "--nmstate", "builtin")
}

// Each NetworkConfig renders, and each address of its ipAddresses ends up
// in a keyfile as an address of the prefix its template gives.
func TestEveryNetworkExampleRenders(t *testing.T) {
	for _, f := range examples(t, "network/*.yaml") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := render(t, f)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("render: exit %d\nstderr: %s", r.code, r.stderr)
			}
			var nc struct {
				IPAddresses map[string]string `yaml:"ipAddresses"`
			}
			b, err := os.ReadFile(f)
			node.Must(t, err)
			node.Must(t, yaml.Unmarshal(b, &nc))
			if len(nc.IPAddresses) == 0 {
				t.Fatal("example has no ipAddresses: nothing shows the substitution")
			}
			keyfiles := r.stdout[strings.Index(r.stdout, "# ---- keyfile:")+1:]
			for name, addr := range nc.IPAddresses {
				if !regexp.MustCompile(`(?m)^address\d+=` + regexp.QuoteMeta(addr) + `/\d+`).MatchString(keyfiles) {
					t.Errorf("{%s} = %s is in no keyfile's address line:\n%s", name, addr, r.stdout)
				}
			}
		})
	}
}

// regserver on each config, on loopback: it starts, reports every pool of
// the file on its admin API, and stops on SIGTERM with exit 0.
func TestRegserverStartsOnEveryConfig(t *testing.T) {
	for _, f := range examples(t, "regserver*.yaml") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var cfg struct {
				Pools []struct{ Name string }
			}
			b, err := os.ReadFile(f)
			node.Must(t, err)
			node.Must(t, yaml.Unmarshal(b, &cfg))
			rs := startRegserver(t, f)
			resp, err := adminGet(t, rs, "/admin/pools")
			node.Must(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var pools []map[string]any
			if err := json.Unmarshal(body, &pools); err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /admin/pools: %d %s (%v)", resp.StatusCode, body, err)
			}
			if len(pools) != len(cfg.Pools) || len(pools) == 0 {
				t.Fatalf("admin API has %d pools, the file %d: %s", len(pools), len(cfg.Pools), body)
			}
			node.Must(t, rs.Signal(syscall.SIGTERM))
			if code := rs.Cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("regserver exit %d after SIGTERM\n%s", code, rs.Stderr.String())
			}
		})
	}
}

// adminToken is the bearer token every regserver of these tests is
// started with (--admin-token-file): the admin API refuses requests
// without it (docs/regserver.md).
const adminToken = "examples-admin-token-0123456789"

func startRegserver(t *testing.T, cfg string) *labkit.Regserver {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	node.Must(t, os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600))
	return labkit.StartRegserver(t, "--config", cfg,
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--admin-token-file", tokenFile,
		"--store", filepath.Join(dir, "state.db"))
}

// adminGet sends one authenticated GET to the admin API.
func adminGet(t *testing.T, rs *labkit.Regserver, path string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rs.AdminBase()+path, nil)
	node.Must(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	return http.DefaultClient.Do(req)
}

// nodes: each node config, the registration it names (by its token) and
// the network example that registration's first machine gets.
var nodes = map[string]string{
	"tpm.yaml":          "nmstate-single-nic.yaml",
	"emulated-tpm.yaml": "nmstate-single-nic.yaml",
	// reaches the server on loopback, so its bootstrap network stays down
	"bootstrap-static.yaml": "nmstate-single-nic.yaml",
	"mac.yaml":              "nmstate-single-nic.yaml",
	"sys-uuid.yaml":         "nmconnections.yaml",
	"bond-vlan.yaml":        "nmstate-bond-vlan.yaml",
	"dual-stack.yaml":       "nmstate-dual-stack.yaml",
}

// machine is a scratch root of the q35 VM inventory fixture (the demo's),
// with the node config in place.
func machine(t *testing.T, config string) string {
	t.Helper()
	root := t.TempDir()
	out, err := exec.Command("cp", "-a", filepath.Join(testbin.ModuleRoot(), "agent/inventory/testdata/vm1")+"/.", root).CombinedOutput()
	if err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	b, err := os.ReadFile(config)
	node.Must(t, err)
	node.Must(t, os.MkdirAll(filepath.Join(root, "oem/registration"), 0o700))
	node.Must(t, os.WriteFile(filepath.Join(root, node.ConfigPath), b, 0o600))
	return root
}

// registrationURL is the node config's url with the host of the server
// under test: the token (and path) stay the example's.
func registrationURL(t *testing.T, config string, rs *labkit.Regserver) string {
	t.Helper()
	var c struct {
		Elemental struct {
			Registration struct {
				URL  string
				Auth string
			}
		}
	}
	b, err := os.ReadFile(config)
	node.Must(t, err)
	node.Must(t, yaml.Unmarshal(b, &c))
	u, err := url.Parse(c.Elemental.Registration.URL)
	if err != nil || u.Host == "" {
		t.Fatalf("url %q: %v", c.Elemental.Registration.URL, err)
	}
	return rs.Base + u.Path
}

// Every node config registers with regserver on examples/regserver.yaml
// (a fresh server each, so the machine is its pools' first) and gets
// exactly what its network example renders to: same addresses, keyfiles,
// applicator and digest, in one piece. The config files draw no
// unknown-key warning.
func TestEveryNodeConfigRegisters(t *testing.T) {
	cfg := filepath.Join(testbin.ModuleRoot(), "examples", "regserver.yaml")
	for _, f := range examples(t, "node/*.yaml") {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			net, ok := nodes[name]
			if !ok {
				t.Fatalf("examples/node/%s is not in this test's table: add it with the network example its registration gives", name)
			}
			want := render(t, filepath.Join(testbin.ModuleRoot(), "examples", "network", net))
			if want.code != 0 {
				t.Fatalf("render %s: %s", net, want.stderr)
			}
			rs := startRegserver(t, cfg)
			args := []string{"--root", machine(t, f), "--dry-run", "--nmstate", "builtin",
				"--registration-url", registrationURL(t, f, rs), "--deadline", "30s", "--network-timeout", "30s"}
			agent := testbin.Build(t, "./cmd/agent")
			switch {
			case name == "tpm.yaml":
				args = append(args, "--tpm-device", tpmtest.StartSwtpm(t, false).Device())
			case name == "emulated-tpm.yaml" && !emulatedBuild:
				// The default build has no emulated TPM: the example says
				// so, and so must the agent.
				r := run(t, agent, args...)
				if r.code != 78 || !strings.Contains(r.stderr, "TPM emulation not compiled in") {
					t.Fatalf("default build on emulate-tpm: exit %d, want 78 naming the emulated build\n%s", r.code, r.stderr)
				}
				return
			case name == "emulated-tpm.yaml":
				agent = testbin.Build(t, "./cmd/agent", "emulatedtpm")
			}
			r := run(t, agent, args...)
			if r.code != 0 {
				t.Fatalf("agent --dry-run: exit %d\nstderr: %s\nregserver: %s", r.code, r.stderr, rs.Stderr.String())
			}
			if strings.Contains(r.stderr, "unknown key") {
				t.Errorf("the example has a key the agent does not read:\n%s", r.stderr)
			}
			if name == "bootstrap-static.yaml" && !strings.HasPrefix(r.stdout, "# bootstrap network: not needed (the registration server is reachable") {
				t.Errorf("a reachable server, yet the dry run does not say the bootstrap network is not needed:\n%s", r.stdout)
			}
			if !strings.Contains(r.stdout, want.stdout) {
				t.Errorf("the registration's config is not examples/network/%s:\n--- dry run\n%s\n--- render\n%s", net, r.stdout, want.stdout)
			}
		})
	}
}

// The bootstrap example, on the VM fixture (whose eth0 MAC is the table's
// first entry): render --bootstrap picks that entry's address and puts it
// in the runtime keyfile, probing and writing nothing.
func TestBootstrapExampleRenders(t *testing.T) {
	root := machine(t, filepath.Join(testbin.ModuleRoot(), "examples", "node", "bootstrap-static.yaml"))
	r := run(t, testbin.Build(t, "./cmd/agent"), "render", "--bootstrap", "--root", root)
	if r.code != 0 {
		t.Fatalf("render --bootstrap: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"{boot-ip}: first try 10.231.0.21 from static[0] (mac 52:54:00:12:34:56)", "\naddress1=10.231.0.21/24,10.231.0.1\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("render --bootstrap lacks %q:\n%s", want, r.stdout)
		}
	}
}

// /etc/default/nodereg's NODEREG_ARGS, split as systemd splits an unquoted
// $VAR, are flags the agent takes: a dry run with them registers, and the
// log is in the format they choose.
func TestDefaultNoderegArgs(t *testing.T) {
	file := filepath.Join(testbin.ModuleRoot(), "examples", "default", "nodereg")
	out, err := exec.Command("sh", "-c", `. "$1" && printf %s "$NODEREG_ARGS"`, "sh", file).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("%s sets no NODEREG_ARGS: %v", file, err)
	}
	extra := strings.Fields(string(out))
	rs := startRegserver(t, filepath.Join(testbin.ModuleRoot(), "examples", "regserver.yaml"))
	mac := filepath.Join(testbin.ModuleRoot(), "examples", "node", "mac.yaml")
	args := append([]string{"--root", machine(t, mac), "--dry-run", "--nmstate", "builtin",
		"--registration-url", registrationURL(t, mac, rs)}, extra...)
	r := run(t, testbin.Build(t, "./cmd/agent"), args...)
	if r.code != 0 {
		t.Fatalf("agent %s: exit %d\n%s", strings.Join(extra, " "), r.code, r.stderr)
	}
	if strings.Contains(string(out), "--log-format json") {
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var v map[string]any
			if json.Unmarshal([]byte(l), &v) != nil {
				t.Fatalf("--log-format json, but a log line is not JSON: %q", l)
			}
		}
	}
	// The --label reaches the inventory (MsgLabels), as the units would send it.
	for i, f := range extra {
		if f != "--label" || i+1 == len(extra) {
			continue
		}
		k, v, _ := strings.Cut(extra[i+1], "=")
		resp, err := adminGet(t, rs, "/admin/inventories")
		node.Must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var invs []struct{ Labels map[string]string }
		if err := json.Unmarshal(body, &invs); err != nil || len(invs) != 1 {
			t.Fatalf("GET /admin/inventories: %v %s", err, body)
		}
		// Labels the machine sends get the prefix (docs/regserver.md).
		if got := invs[0].Labels["elemental.cattle.io/"+k]; got != v {
			t.Errorf("--label %s=%s: the inventory has %q: %v", k, v, got, invs[0].Labels)
		}
	}
}
