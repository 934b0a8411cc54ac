package cli_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/tests/internal/node"
	"github.com/nodereg/nodereg/tests/internal/testbin"
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
func TestRootDoesNotApplyLiveWithoutApplyLive(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(node.ServerConfig{
		Name: "cli", Network: node.AddressOnlyTemplate(24),
		Pool: "192.168.122.150-192.168.122.160", Prefix: 24, Gateway: "192.168.122.1",
	}.YAML()), 0o600))
	rs := node.StartRegserver(t, nil, testbin.Build(t, "./cmd/regserver"), "--config", cfg, "--listen", "127.0.0.1:0", "--no-tpm", "--network-wait", "0")
	m := node.New(t, "52:54:00:00:0e:0c", rs.URL("cli-token"), "")
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	log := filepath.Join(m.StubDir, "calls.jsonl")
	// nmcli points at the recording stand-in too: any call is logged.
	env := []string{apply.EnvNmstatectl + "=" + stub, apply.EnvNmcli + "=" + stub,
		"NMSTATECTL_STUB_STATE=" + filepath.Join(m.StubDir, "checkpoint"), "NMSTATECTL_STUB_LOG=" + log}
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
