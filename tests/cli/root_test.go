package cli_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// calls reads the stand-in's call log: the first argument of each call.
func calls(t *testing.T, log string) []string {
	t.Helper()
	f, err := os.Open(log)
	if os.IsNotExist(err) {
		return nil
	}
	node.Must(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c struct{ Args []string }
		node.Must(t, json.Unmarshal(sc.Bytes(), &c))
		out = append(out, strings.Join(c.Args, " "))
	}
	return out
}

// A --root other than / persists under the root and runs no tool that
// changes the host's live network; --apply-live opts in.
// nmstateServer is regserver with one nmstate template and a pool.
func nmstateServer(t *testing.T) *labkit.Regserver {
	t.Helper()
	return regserverWith(t, node.ServerConfig{
		Name: "cli", Network: node.AddressOnlyTemplate(24),
		Pool: "192.168.122.150-192.168.122.160", Prefix: 24, Gateway: "192.168.122.1",
	}.YAML(), "--no-tpm")
}

func TestRootDoesNotApplyLiveWithoutApplyLive(t *testing.T) {
	rs := nmstateServer(t)
	m := node.New(t, "52:54:00:00:0e:0c", rs.URL("cli-token"), "")
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	log := filepath.Join(m.StubDir, "calls.jsonl")
	// nmcli points at the recording stand-in too: any call is logged.
	env := []string{host.EnvNmstatectl + "=" + stub, host.EnvNmcli + "=" + stub,
		"NMSTATECTL_STUB_STATE=" + filepath.Join(m.StubDir, "checkpoint"), "NMSTATECTL_STUB_LOG=" + log, "NMSTATECTL_STUB_INTERFACES=" + node.NIC}
	live := func(cs []string) []string {
		var out []string
		for _, c := range cs {
			if !strings.HasPrefix(c, "gc") && c != "--version" && c != "version" {
				out = append(out, c)
			}
		}
		return out
	}

	r := agent(t, "agent", env, "--root", m.Root)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := live(calls(t, log)); len(got) != 0 {
		t.Errorf("--root without --apply-live ran %q", got)
	}
	if _, err := os.Stat(filepath.Join(m.Root, "oem/elemental-network.yaml")); err != nil {
		t.Errorf("applicator not persisted under the root: %v", err)
	}
	if !strings.Contains(r.stderr, "not applied live") {
		t.Errorf("no line saying it did not apply live:\n%s", r.stderr)
	}

	node.Must(t, os.Remove(log))
	r = agent(t, "agent", env, "--root", m.Root, "--apply-live")
	if r.code != 0 {
		t.Fatalf("--apply-live: exit %d\n%s", r.code, r.stderr)
	}
	got := live(calls(t, log))
	if !slices.ContainsFunc(got, func(c string) bool { return strings.HasPrefix(c, "apply") }) || !slices.Contains(got, "commit") {
		t.Errorf("--apply-live ran %q, want apply and commit", got)
	}

	node.Must(t, os.Remove(log))
	r = agent(t, "agent", env, "--root", m.Root, "--reset-network")
	if r.code != 0 {
		t.Fatalf("--reset-network: exit %d\n%s", r.code, r.stderr)
	}
	if got := live(calls(t, log)); len(got) != 0 {
		t.Errorf("--reset-network under --root ran %q", got)
	}
	if _, err := os.Stat(filepath.Join(m.Root, "oem/elemental-network.yaml")); !os.IsNotExist(err) {
		t.Errorf("applicator still there after --reset-network: %v", err)
	}
}

// --reset-network removes what is there and says only that; a second one
// has nothing to remove; a NetworkManager that cannot be reloaded is a
// warning, not a failure.
func TestResetNetworkReportsWhatItRemovedAndIsIdempotent(t *testing.T) {
	rs := nmstateServer(t)
	m := node.New(t, "52:54:00:00:0e:0d", rs.URL("cli-token"), "")
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	env := []string{host.EnvNmstatectl + "=" + stub, "NMSTATECTL_STUB_LOG=" + filepath.Join(m.StubDir, "calls.jsonl"),
		"NMSTATECTL_STUB_STATE=" + filepath.Join(m.StubDir, "checkpoint"), "NMSTATECTL_STUB_INTERFACES=" + node.NIC}
	if r := agent(t, "agent", env, "--root", m.Root); r.code != 0 {
		t.Fatalf("registration: exit %d\n%s", r.code, r.stderr)
	}
	var ours []string
	for p := range node.Files(t, m.Root) {
		if strings.HasPrefix(p, "oem/nodereg/") || p == "oem/elemental-network.yaml" {
			ours = append(ours, p)
		}
	}
	if len(ours) < 2 {
		t.Fatalf("setup: the agent's network files: %v", ours)
	}
	// Dry run first: lists exactly what is there, removes nothing.
	r := agent(t, "agent", env, "--root", m.Root, "--reset-network", "--dry-run")
	if r.code != 0 || strings.Count(r.stdout, "# would remove ") != len(ours) {
		t.Fatalf("dry run: exit %d, want %d files listed:\n%s", r.code, len(ours), r.stdout)
	}
	// NetworkManager "down": nmcli cannot be run, live apply asked for.
	noNM := append(env, host.EnvNmcli+"=/nonexistent/nmcli")
	r = agent(t, "agent", noNM, "--root", m.Root, "--apply-live", "--reset-network")
	if r.code != 0 {
		t.Fatalf("--reset-network without NetworkManager: exit %d\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, `msg=removed`); n != len(ours) {
		t.Errorf("%d removed lines for %d files:\n%s", n, len(ours), r.stderr)
	}
	for _, p := range ours {
		if !strings.Contains(r.stderr, "path="+filepath.Join(m.Root, p)) {
			t.Errorf("%s not reported as removed", p)
		}
		if _, err := os.Stat(filepath.Join(m.Root, p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if !strings.Contains(r.stderr, "level=warning") || !strings.Contains(r.stderr, "NetworkManager was not reloaded") {
		t.Errorf("no warning about NetworkManager:\n%s", r.stderr)
	}
	// Again: nothing to remove, nothing reported removed, exit 0.
	r = agent(t, "agent", noNM, "--root", m.Root, "--apply-live", "--reset-network")
	if r.code != 0 || !strings.Contains(r.stderr, "nothing to remove") || strings.Contains(r.stderr, "msg=removed") || strings.Contains(r.stderr, "level=warning") {
		t.Errorf("second --reset-network: exit %d\n%s", r.code, r.stderr)
	}
	r = agent(t, "agent", noNM, "--root", m.Root, "--reset-network", "--dry-run")
	if r.code != 0 || strings.Contains(r.stdout, "would remove") || !strings.Contains(r.stdout, "# nothing to remove") {
		t.Errorf("dry run on a clean node: exit %d\n%s", r.code, r.stdout)
	}
}
