package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// stubPath is the nmstatectl stand-in, built once for the whole test binary.
var stubPath string

func TestMain(m *testing.M) {
	var err error
	if stubPath, err = testbin.Path("./tests/stubs/nmstatectl"); err != nil {
		fmt.Fprintln(os.Stderr, "building the nmstatectl stand-in:", err)
		os.Exit(1)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// stubEnv is one test's nmstatectl stand-in: its call log and checkpoint.
type stubEnv struct{ testutil.Stub }

// newStub's machine has the one NIC the registration vector's network
// config names (enp1s0): the stand-in, like the real tool, refuses to
// configure an interface the machine does not have.
func newStub(t testing.TB) *stubEnv {
	s := testutil.NewStub(t)
	s.Interfaces = []string{"enp1s0"}
	return &stubEnv{s}
}

func (s *stubEnv) env(extra ...string) []string { return append(s.Env(), extra...) }

// subcommands lists the first argument of each call, e.g. [gc apply commit].
func (s *stubEnv) subcommands(t testing.TB) []string {
	var subs []string
	for _, c := range s.Calls(t) {
		subs = append(subs, c.Args[0])
	}
	return subs
}

func count(l []string, s string) int {
	n := 0
	for _, e := range l {
		if e == s {
			n++
		}
	}
	return n
}

func (s *stubEnv) applier(root string, extraEnv ...string) *Applier {
	return &Applier{Files: host.Root(root), Tools: host.Tools{Nmstatectl: stubPath}, Env: s.env(extraEnv...)}
}

// stubbedRoot is where most of these tests start: a fresh root, the
// nmstatectl stub, and an applier that runs the stub on that root.
func stubbedRoot(t testing.TB, extraEnv ...string) (root string, stub *stubEnv, a *Applier) {
	t.Helper()
	root, stub = t.TempDir(), newStub(t)
	return root, stub, stub.applier(root, extraEnv...)
}

func writeFile(t testing.TB, root, p, content string, perm os.FileMode) {
	t.Helper()
	testutil.WriteFile(t, root, p, content, perm)
}

func readFile(t testing.TB, root, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gcKeyfiles asks the stand-in directly what gc makes of a state, so a test
// compares the applicator's output with the tool's, not with our own code.
func gcKeyfiles(t testing.TB, state []byte) map[string]string {
	t.Helper()
	cmd := exec.Command(stubPath, "gc", "-")
	cmd.Stdin = strings.NewReader(string(state))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("stand-in gc: %v", err)
	}
	var doc map[string][][]string
	if err := yamlUnmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range doc["NetworkManager"] {
		m[e[0]] = e[1]
	}
	return m
}

func mustPlan(t testing.TB, a *Applier, r *Rendered) *Plan {
	t.Helper()
	p, err := a.Plan(context.Background(), r)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return p
}

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// connectionID is the id nmcli uses to bring a keyfile's connection up: the
// [connection] id, else the file name without its suffix, as NetworkManager
// does.
func connectionID(kf Keyfile) string {
	return readProfile(kf.Name, kf.Content).ID
}

func TestParseProfiles(t *testing.T) {
	out := []byte("1b0a6c38-5e2f-4a34-9d1c-3f2a0e7b1c11:/etc/NetworkManager/system-connections/eth0.nmconnection\n" +
		"7f3e2d1c-0000-4000-8000-000000000001:/run/x/a\\:b.nmconnection\n" +
		"2c1d0e9f-0000-4000-8000-000000000002:\n")
	got := parseProfiles(out)
	want := map[string]string{
		"/etc/NetworkManager/system-connections/eth0.nmconnection": "1b0a6c38-5e2f-4a34-9d1c-3f2a0e7b1c11",
		"/run/x/a:b.nmconnection":                                  "7f3e2d1c-0000-4000-8000-000000000001",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s -> %q, want %q", k, got[k], v)
		}
	}
}
