package apply

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

func renderVector(t testing.TB, ip string) *Rendered {
	t.Helper()
	nc := loadVector(t)
	nc.IPAddresses = map[string]string{"inventory-ip": ip}
	r, err := Render(nc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func renderNmconnections(t testing.TB, ip string) *Rendered {
	t.Helper()
	r, err := Render(&protocol.NetworkConfig{
		Configurator: "nmconnections",
		IPAddresses:  map[string]string{"ip1": ip},
		Config:       map[string]protocol.RawValue{"eth0": {Value: eth0Template}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	applicatorPath = "oem/elemental-network.yaml"
	keyfileDirRel  = "etc/NetworkManager/system-connections"
)

func TestPlanNmstate(t *testing.T) {
	root, stub, a := stubbedRoot(t)
	r := renderVector(t, "192.168.122.150")
	p := mustPlan(t, a, r)
	if got := stub.subcommands(t); !reflect.DeepEqual(got, []string{"gc"}) {
		t.Fatalf("planning ran %v, want only gc", got)
	}
	if c := stub.Calls(t)[0]; c.Stdin != string(r.Digested) || !reflect.DeepEqual(c.Args, []string{"gc", "-"}) {
		t.Errorf("gc call %+v did not get the digested state", c)
	}
	want := gcKeyfiles(t, r.Digested)
	if len(p.Keyfiles) != len(want) {
		t.Fatalf("keyfiles %d, want %d", len(p.Keyfiles), len(want))
	}
	for _, kf := range p.Keyfiles {
		if want[kf.Name] != string(kf.Content) {
			t.Errorf("keyfile %s differs from gc's output", kf.Name)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("Plan wrote into the root: %v", entries)
	}
	// Same input, same digest; another address, another digest.
	if d2 := mustPlan(t, a, renderVector(t, "192.168.122.150")).Digest(); d2 != p.Digest() {
		t.Errorf("digest not stable: %s vs %s", p.Digest(), d2)
	}
	if d3 := mustPlan(t, a, renderVector(t, "192.168.122.151")).Digest(); d3 == p.Digest() {
		t.Errorf("digest ignores the address")
	}
}

func TestPersistLayout(t *testing.T) {
	stub := newStub(t)
	root := t.TempDir()
	writeFile(t, root, "oem/90_custom.yaml", "name: foreign\n", 0o644)
	a := stub.applier(root)
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, root, applicatorPath); got != string(p.Applicator) {
		t.Errorf("applicator differs from plan")
	}
	if got := readFile(t, root, "oem/nodereg/network-config.nmstate"); got != string(p.Digested) {
		t.Errorf("digested config differs from plan")
	}
	var m state.Manifest
	if err := jsonUnmarshal([]byte(readFile(t, root, "oem/nodereg/network-manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Digest != p.Digest() || m.Configurator != "nmstate" {
		t.Errorf("manifest %+v", m)
	}
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	wantPaths := []string{"/etc/NetworkManager/system-connections/enp1s0.nmconnection", "/oem/nodereg/network-config.nmstate", "/oem/elemental-network.yaml"}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("manifest files %v, want %v", paths, wantPaths)
	}
	// Everything under /oem the agent wrote is 0600, nothing it left is
	// YAML that yip would load besides the applicator, and no temp file
	// remains.
	err := filepath.WalkDir(filepath.Join(root, "oem"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "oem/90_custom.yaml" {
			return nil
		}
		st, _ := os.Stat(p)
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", rel, st.Mode().Perm())
		}
		if strings.HasSuffix(rel, ".tmp") {
			t.Errorf("temp file left: %s", rel)
		}
		if (strings.HasSuffix(rel, ".yaml") || strings.HasSuffix(rel, ".yml")) && rel != applicatorPath {
			t.Errorf("yip would load %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, root, "oem/90_custom.yaml") != "name: foreign\n" {
		t.Errorf("foreign /oem file changed")
	}
	// The applicator does not start with #cloud-config and has no
	// mudler-only fields.
	if strings.HasPrefix(string(p.Applicator), "#cloud-config") {
		t.Errorf("applicator would be read as cloud-init")
	}
	for _, f := range []string{"only_os", "if_files", "only_arch", "modules", "packages"} {
		if strings.Contains(string(p.Applicator), f+":") {
			t.Errorf("applicator uses %s, which Elemental's yip ignores", f)
		}
	}
}

func TestApplyLiveNmstateCommits(t *testing.T) {
	root, stub, a := stubbedRoot(t)
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	checked := 0
	err := a.ApplyLive(context.Background(), p, func(ctx context.Context) error {
		checked++
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("reachability check without a deadline")
		}
		// The checkpoint exists while the check runs.
		if _, err := os.Stat(stub.State); err != nil {
			t.Errorf("no pending checkpoint during the check: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ApplyLive: %v", err)
	}
	if checked != 1 {
		t.Errorf("reachable called %d times", checked)
	}
	calls := stub.Calls(t)
	subs := stub.subcommands(t)
	if !reflect.DeepEqual(subs, []string{"gc", "apply", "commit"}) {
		t.Fatalf("calls %v, want gc apply commit", subs)
	}
	if got := calls[1].Args; !reflect.DeepEqual(got, []string{"apply", "--no-commit", "--timeout", "60", "-"}) {
		t.Errorf("apply args %v", got)
	}
	if calls[1].Stdin != string(p.Digested) {
		t.Errorf("apply did not get the digested state")
	}
	if readFile(t, root, applicatorPath) != string(p.Applicator) {
		t.Errorf("applicator not persisted")
	}
}

func TestApplyLiveNmstateRollsBack(t *testing.T) {
	unreachable := errors.New("registration server unreachable")
	cases := []struct {
		name      string
		env       []string
		reachable error
		timeout   time.Duration
		wantSubs  []string
	}{
		{"apply fails", []string{"NMSTATECTL_STUB_FAIL=apply"}, nil, 0, []string{"apply", "rollback"}},
		{"server unreachable", nil, unreachable, 0, []string{"apply", "rollback"}},
		{"commit fails", []string{"NMSTATECTL_STUB_FAIL=commit"}, nil, 0, []string{"apply", "commit", "rollback"}},
		{"apply hangs", []string{"NMSTATECTL_STUB_HANG=apply"}, nil, 500 * time.Millisecond, []string{"apply", "rollback"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, "oem/90_custom.yaml", "name: foreign\n", 0o644)
			// The previous, working config.
			stub := newStub(t)
			prev := stub.applier(root)
			if err := prev.ApplyLive(context.Background(), mustPlan(t, prev, renderVector(t, "192.168.122.150")), nil); err != nil {
				t.Fatal(err)
			}
			before := testutil.Tree(t, root)
			prevApplicator := readFile(t, root, applicatorPath)

			stub2 := newStub(t)
			a := stub2.applier(root, tc.env...)
			a.CommandTimeout = tc.timeout
			p := mustPlan(t, a, renderVector(t, "192.168.122.160"))
			err := a.ApplyLive(context.Background(), p, func(context.Context) error { return tc.reachable })
			if err == nil {
				t.Fatal("ApplyLive succeeded")
			}
			if !errors.Is(err, ErrRolledBack) {
				t.Errorf("error %v is not ErrRolledBack", err)
			}
			var le *LiveApplyError
			if !errors.As(err, &le) {
				t.Errorf("error %T is not a LiveApplyError", err)
			} else if le.RollbackErr != nil {
				t.Errorf("the way back failed: %v", le.RollbackErr)
			}
			if tc.reachable != nil && !errors.Is(err, tc.reachable) {
				t.Errorf("error %v does not wrap the reachability failure", err)
			}
			subs := stub2.subcommands(t)[1:] // after gc
			if !reflect.DeepEqual(subs, tc.wantSubs) {
				t.Errorf("calls %v, want %v", subs, tc.wantSubs)
			}
			if count(subs, "commit") > 0 && tc.name != "commit fails" {
				t.Errorf("commit called on a failed apply")
			}
			if got := readFile(t, root, applicatorPath); got != prevApplicator {
				t.Errorf("previous applicator not kept byte for byte")
			}
			if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
				t.Errorf("root changed by a rolled-back apply:\n%s", d)
			}
		})
	}
}

func TestToolMissingFailsFirst(t *testing.T) {
	cases := []struct {
		tool string
		r    *Rendered
		a    func(root string) *Applier
	}{
		{"nmstatectl", renderVector(t, "192.168.122.150"), func(root string) *Applier {
			// Chosen explicitly: auto takes the built-in translator then.
			return &Applier{Files: host.Root(root), Tools: host.Tools{Nmstatectl: "/nonexistent/nmstatectl"}, Nmstate: NmstateNmstatectl}
		}},
		{"nmc", &Rendered{Configurator: "nmc", State: map[string]any{}, Digested: []byte("interfaces: []\n")}, func(root string) *Applier {
			return &Applier{Files: host.Root(root), Tools: host.Tools{Nmc: "nodereg-no-such-nmc"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, "oem/90_custom.yaml", "x\n", 0o644)
			before := testutil.Tree(t, root)
			_, err := tc.a(root).Plan(context.Background(), tc.r)
			var tm *host.ToolMissingError
			if !errors.As(err, &tm) || tm.Tool != tc.tool || !strings.Contains(err.Error(), tc.tool) {
				t.Fatalf("want host.ToolMissingError naming %s, got %v", tc.tool, err)
			}
			if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cause not kept: %v", err)
			}
			if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
				t.Errorf("root changed:\n%s", d)
			}
		})
	}
	// nmcli is needed only to apply keyfiles live.
	root := t.TempDir()
	a := &Applier{Files: host.Root(root), Tools: host.Tools{Nmcli: "/nonexistent/nmcli"}}
	p := mustPlan(t, a, renderNmconnections(t, "10.0.0.2"))
	err := a.ApplyLive(context.Background(), p, nil)
	var tm *host.ToolMissingError
	if !errors.As(err, &tm) || tm.Tool != "nmcli" {
		t.Fatalf("want host.ToolMissingError nmcli, got %v", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("wrote before finding nmcli missing")
	}
}

// The pipeline the agent runs, refused at the first step for hostile input:
// nothing under the root changes.
func TestHostileConfigsWriteNothing(t *testing.T) {
	ips := map[string]string{"ip": "192.168.1.5"}
	hostile := map[string]*protocol.NetworkConfig{
		"interface name": nmstateConfig(t, ips, map[string]string{"interfaces": `[{"name":"../../etc/x","type":"ethernet"}]`}),
		"template":       nmstateConfig(t, ips, map[string]string{"interfaces": `[{"name":"eth0","description":"{{ .Values }}"}]`}),
		"address":        nmstateConfig(t, map[string]string{"ip": "192.168.1.5\n  evil: 1"}, map[string]string{"interfaces": `[{"name":"eth0","ipv4":{"address":[{"ip":"{ip}","prefix-length":24}]}}]`}),
		"key":            nmstateConfig(t, ips, map[string]string{"interfaces": `[{"name":"eth0","{ip}":1}]`}),
	}
	for name, nc := range hostile {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, "oem/90_custom.yaml", "x\n", 0o644)
			before := testutil.Tree(t, root)
			stub := newStub(t)
			a := stub.applier(root)
			err := func() error {
				r, err := Render(nc)
				if err != nil {
					return err
				}
				p, err := a.Plan(context.Background(), r)
				if err != nil {
					return err
				}
				return a.ApplyLive(context.Background(), p, nil)
			}()
			var fe *FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Path, "config.") && !strings.HasPrefix(fe.Path, "ipAddresses.") {
				t.Fatalf("want FieldError naming a field, got %v", err)
			}
			if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
				t.Errorf("root changed:\n%s", d)
			}
			if calls := stub.Calls(t); len(calls) != 0 {
				t.Errorf("tool ran: %v", calls)
			}
		})
	}
}

func TestParseGC(t *testing.T) {
	// gc's double-quoted form with the blank-line trick (docs/apply.md)
	// decodes like the block form.
	quoted := "NetworkManager:\n- - eth0.nmconnection\n  - \"[connection]\n\n    id=eth0\n\n    type=ethernet\n\n    \"\n"
	kfs, err := parseGC([]byte(quoted))
	if err != nil || len(kfs) != 1 || string(kfs[0].Content) != "[connection]\nid=eth0\ntype=ethernet\n" {
		t.Fatalf("parseGC(quoted) = %q, %v", kfs, err)
	}
	bad := map[string]string{
		"escaping name": "NetworkManager:\n- - ../x.nmconnection\n  - \"[connection]\\nid=x\\n\"\n",
		"hidden name":   "NetworkManager:\n- - .x.nmconnection\n  - \"[connection]\\nid=x\\n\"\n",
		"not keyfile":   "NetworkManager:\n- - x.nmconnection\n  - \"hello\"\n",
		"three items":   "NetworkManager:\n- [a, b, c]\n",
		"no key":        "Other: []\n",
		"not yaml":      "NetworkManager: [\n",
	}
	for name, in := range bad {
		if _, err := parseGC([]byte(in)); err == nil {
			t.Errorf("%s: parseGC accepted %q", name, in)
		}
	}
}

func TestResetNetworkRemovesOnlyOwned(t *testing.T) {
	root := t.TempDir()
	lab := startNM(t, filepath.Join(root, keyfileDirRel))
	const foreignKeyfile = "[connection]\nid=foreign\ntype=ethernet\ninterface-name=eth9\n"
	writeFile(t, root, keyfileDirRel+"/foreign.nmconnection", foreignKeyfile, 0o600)
	writeFile(t, root, "oem/90_custom.yaml", "name: foreign\n", 0o644)
	writeFile(t, root, "oem/nodereg/notes.txt", "kept\n", 0o600)
	// Our config, persisted, and its keyfiles installed live.
	a := &Applier{Files: host.Root(root), Env: lab.env}
	p := mustPlan(t, a, renderNmconnections(t, "10.0.0.2"))
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", string(p.Keyfiles[0].Content), 0o600)
	foreign := map[string]string{}
	for k, v := range testutil.Tree(t, root) {
		if strings.Contains(k, "foreign") || strings.HasSuffix(k, "90_custom.yaml") || strings.HasSuffix(k, "notes.txt") {
			foreign[k] = v
		}
	}
	if len(foreign) != 3 {
		t.Fatalf("setup: %v", foreign)
	}
	if err := a.ResetNetwork(context.Background()); err != nil {
		t.Fatalf("ResetNetwork: %v", err)
	}
	after := testutil.Tree(t, root)
	for k, v := range foreign {
		if after[k] != v {
			t.Errorf("foreign %s changed: %q -> %q", k, v, after[k])
		}
	}
	for _, gone := range []string{applicatorPath, keyfileDirRel + "/eth0.nmconnection", "oem/nodereg/network-config.nmconnections", "oem/nodereg/network-manifest.json"} {
		if _, ok := after[gone]; ok {
			t.Errorf("%s not removed", gone)
		}
	}
	// NetworkManager reloaded: it knows the foreign profile and not ours.
	if got := lab.profiles(t); !reflect.DeepEqual(got, []string{"foreign"}) {
		t.Errorf("NetworkManager profiles after reset: %v", got)
	}
	// A second reset is a no-op.
	if err := a.ResetNetwork(context.Background()); err != nil {
		t.Errorf("second ResetNetwork: %v", err)
	}
}

func TestResetNetworkIgnoresForeignManifestEntries(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "etc/passwd", "root:x:0:0\n", 0o644)
	writeFile(t, root, "oem/nodereg/network-manifest.json",
		`{"version":1,"files":[{"path":"/etc/passwd","kind":"keyfile"},{"path":"/etc/NetworkManager/system-connections/../../passwd","kind":"keyfile"}]}`, 0o600)
	a := &Applier{Files: host.Root(root), Tools: host.Tools{Nmcli: "/nonexistent/nmcli"}}
	err := a.ResetNetwork(context.Background())
	var tm *host.ToolMissingError
	if !errors.As(err, &tm) {
		t.Errorf("want the missing nmcli reported after removal, got %v", err)
	}
	if readFile(t, root, "etc/passwd") != "root:x:0:0\n" {
		t.Errorf("reset removed a file outside the agent's directories")
	}
}

// RemoveNetwork returns exactly the files of ours that existed: the dry
// run's edges list them and touch nothing; without nmcli the files still go
// and only a *ReloadError is left; with nothing of ours there it removes
// nothing and leaves NetworkManager alone.
func TestRemoveNetworkReportsWhatExisted(t *testing.T) {
	root, stub, a := stubbedRoot(t)
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	if err := a.Persist(p); err != nil {
		t.Fatal(err)
	}
	persisted, err := p.Persisted()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range persisted {
		want = append(want, filepath.Join(root, f.Path))
	}
	slices.Sort(want)
	before := testutil.Tree(t, root)

	var out bytes.Buffer
	dry := stub.applier(root)
	dry.Files, dry.Runner = host.Print{Root: host.Root(root), W: &out}, host.PrintRunner{W: &out}
	listed, err := dry.RemoveNetwork(context.Background())
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := slices.Sorted(slices.Values(listed)); !slices.Equal(got, want) {
		t.Errorf("dry run listed %v, want %v", got, want)
	}
	if n := strings.Count(out.String(), "# would remove "); n != len(want) || !strings.Contains(out.String(), "connection reload") {
		t.Errorf("dry-run output, want %d removals and the reload:\n%s", len(want), out.String())
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
		t.Errorf("dry run changed the root:\n%s", d)
	}

	a.Tools.Nmcli = "/nonexistent/nmcli"
	removed, err := a.RemoveNetwork(context.Background())
	var reload *ReloadError
	var tm *host.ToolMissingError
	if !errors.As(err, &reload) || !errors.As(err, &tm) {
		t.Errorf("without nmcli: want a *ReloadError naming the missing tool, got %v", err)
	}
	if got := slices.Sorted(slices.Values(removed)); !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, f := range want {
		if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there: %v", f, err)
		}
	}

	out.Reset()
	listed, err = dry.RemoveNetwork(context.Background())
	if err != nil || len(listed) != 0 || out.Len() != 0 {
		t.Errorf("nothing left: listed %v, err %v, output %q", listed, err, out.String())
	}
	if removed, err := a.RemoveNetwork(context.Background()); err != nil || len(removed) != 0 {
		t.Errorf("nothing left: removed %v, err %v (NetworkManager must be left alone)", removed, err)
	}
}

// A live nmconnections apply against a real NetworkManager that cannot
// activate the profile (no such device) puts the previous keyfiles and
// applicator back.
func TestApplyLiveKeyfilesRollsBack(t *testing.T) {
	root := t.TempDir()
	lab := startNM(t, filepath.Join(root, keyfileDirRel))
	const prevKeyfile = "[connection]\nid=eth0\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=auto\n"
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", prevKeyfile, 0o600)
	writeFile(t, root, applicatorPath, "name: previous\n", 0o600)
	// The previous keyfile is ours: the previous config's manifest lists it.
	writeFile(t, root, "oem/nodereg/network-manifest.json", `{"version":1,"files":[{"path":"/etc/NetworkManager/system-connections/eth0.nmconnection","kind":"keyfile"}]}`, 0o600)
	before := testutil.Tree(t, root)
	a := &Applier{Files: host.Root(root), Env: lab.env}
	p := mustPlan(t, a, renderNmconnections(t, "10.0.0.2"))
	err := a.ApplyLive(context.Background(), p, nil)
	if !errors.Is(err, ErrRolledBack) || !strings.Contains(err.Error(), "connection up") {
		t.Fatalf("want a rolled-back connection up failure, got %v", err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
		t.Errorf("root not restored:\n%s", d)
	}
	if got := lab.profiles(t); !reflect.DeepEqual(got, []string{"eth0"}) {
		t.Errorf("profiles after rollback: %v", got)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	root := t.TempDir()
	// A machine with a previous config and foreign files.
	stub := newStub(t)
	prev := stub.applier(root)
	if err := prev.Persist(mustPlan(t, prev, renderVector(t, "192.168.122.150"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, keyfileDirRel+"/foreign.nmconnection", "[connection]\nid=f\n", 0o600)
	writeFile(t, root, "oem/90_custom.yaml", "x\n", 0o644)
	before := testutil.Tree(t, root)

	for _, r := range []*Rendered{renderVector(t, "192.168.122.170"), renderNmconnections(t, "10.0.0.9")} {
		var out bytes.Buffer
		stub := newStub(t)
		a := stub.applier(root)
		// The dry run's edges: printed files and commands; only the
		// read-only ones run.
		a.Files = host.Print{Root: host.Root(root), W: &out}
		a.Runner = host.PrintRunner{W: &out, Real: a.runner()}
		a.Tools.Nmcli = "/bin/false" // nothing may run it but a read-only query
		p := mustPlan(t, a, r)
		p.Print(&out)
		if r.Configurator == "nmstate" {
			if err := a.ApplyLive(context.Background(), p, nil); err != nil {
				t.Fatalf("dry-run ApplyLive: %v", err)
			}
		}
		if err := a.Persist(p); err != nil {
			t.Fatal(err)
		}
		if err := a.ResetNetwork(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		for _, want := range []string{string(p.Digested), string(p.Keyfiles[0].Content), string(p.Applicator), "/oem/elemental-network.yaml", "# would run"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s dry-run output lacks %q:\n%s", r.Configurator, want, s)
			}
		}
		if r.Configurator == "nmstate" {
			if !strings.Contains(s, "apply --no-commit --timeout 60 -") || !strings.Contains(s, "commit") {
				t.Errorf("dry-run output lacks the nmstatectl commands:\n%s", s)
			}
			if subs := stub.subcommands(t); !reflect.DeepEqual(subs, []string{"gc"}) {
				t.Errorf("dry-run ran %v; only gc is side-effect free", subs)
			}
		}
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
		t.Errorf("dry-run changed the root:\n%s", d)
	}
}

// Keyfiles the agent generates pass NetworkManager's own parser.
func TestKeyfilesPassNmcliOffline(t *testing.T) {
	if _, err := exec.LookPath("nmcli"); err != nil {
		t.Skip("nmcli not installed (apt package network-manager)")
	}
	if err := exec.Command("nmcli", "--offline", "--version").Run(); err != nil {
		t.Skip("this nmcli has no --offline mode")
	}
	stub := newStub(t)
	a := stub.applier(t.TempDir())
	kfs := append(mustPlan(t, a, renderNmconnections(t, "192.168.122.10")).Keyfiles,
		mustPlan(t, a, renderVector(t, "192.168.122.150")).Keyfiles...)
	for _, kf := range kfs {
		c := exec.Command("nmcli", "--offline", "connection", "modify", "connection.id", connectionID(kf))
		c.Stdin = bytes.NewReader(kf.Content)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("nmcli --offline rejects %s: %v\n%s", kf.Name, err, out)
		}
	}
	// And it does reject a broken one, so the check can fail.
	c := exec.Command("nmcli", "--offline", "connection", "modify", "connection.id", "x")
	c.Stdin = strings.NewReader("[connection]\nid=x\ntype=ethernet\n[ipv4]\nmethod=manual\naddress1=nope/24\n")
	if err := c.Run(); err == nil {
		t.Errorf("nmcli --offline accepted a broken keyfile")
	}
}

func BenchmarkRenderPersist(b *testing.B) {
	nc := loadVector(b)
	root := b.TempDir()
	a := &Applier{Files: host.Root(root)}
	for i := 0; i < b.N; i++ {
		nc.Configurator = "nmconnections"
		r, err := Render(&protocol.NetworkConfig{
			Configurator: "nmconnections",
			IPAddresses:  nc.IPAddresses,
			Config:       map[string]protocol.RawValue{"eth0": {Value: strings.ReplaceAll(eth0Template, "{ip1}", "{inventory-ip}")}},
		})
		if err != nil {
			b.Fatal(err)
		}
		p, err := a.Plan(context.Background(), r)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Persist(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderNmstate(b *testing.B) {
	nc := loadVector(b)
	for i := 0; i < b.N; i++ {
		if _, err := Render(nc); err != nil {
			b.Fatal(err)
		}
	}
}
