package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

// foreignKeyfile is an image's or admin's profile that happens to carry a
// name a server-sent config also uses.
const foreignKeyfile = "[connection]\nid=admin-eth0\ntype=ethernet\ninterface-name=eth0\n\n[ipv4]\nmethod=auto\n"

// wantNotOwned asserts err refuses exactly the host path p.
func wantNotOwned(t *testing.T, err error, p string) {
	t.Helper()
	var no *NotOwnedError
	if !errors.As(err, &no) {
		t.Fatalf("want a *NotOwnedError, got %v", err)
	}
	if no.Path != p || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not ours") {
		t.Errorf("error %q does not name %s as not ours", err, p)
	}
}

// gcNames are the keyfile names nmstatectl gc (the stand-in) gives the
// seed vector: the names the built-in translator must use too.
func gcNames(t *testing.T) []string {
	names := []string{}
	for n := range gcKeyfiles(t, renderVector(t, "192.168.122.150").Digested) {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("stand-in gc made no keyfiles")
	}
	return names
}

func TestPlanRefusesForeignKeyfile(t *testing.T) {
	nmstateName := gcNames(t)[0]
	cases := []struct {
		name    string
		keyfile string
		applier func(stub *stubEnv, root string) *Applier
		render  func(t *testing.T) *Rendered
	}{
		{"nmconnections", "eth0.nmconnection",
			func(_ *stubEnv, root string) *Applier { return &Applier{Files: host.Root(root)} },
			func(t *testing.T) *Rendered { return renderNmconnections(t, "10.0.0.2") }},
		{"nmstate built-in", nmstateName,
			func(_ *stubEnv, root string) *Applier {
				return &Applier{Files: host.Root(root), Nmstate: NmstateBuiltin}
			},
			func(t *testing.T) *Rendered { return renderVector(t, "192.168.122.150") }},
		{"nmstate by nmstatectl", nmstateName,
			func(stub *stubEnv, root string) *Applier { return stub.applier(root) },
			func(t *testing.T) *Rendered { return renderVector(t, "192.168.122.150") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stub := newStub(t)
			root := t.TempDir()
			writeFile(t, root, keyfileDirRel+"/"+c.keyfile, foreignKeyfile, 0o600)
			before := testutil.Tree(t, root)
			a := c.applier(stub, root)
			_, err := a.Plan(context.Background(), c.render(t))
			wantNotOwned(t, err, "/"+keyfileDirRel+"/"+c.keyfile)
			if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
				t.Errorf("a refused plan changed the root:\n%s", d)
			}
			// The bootstrap network's keyfiles go elsewhere: no check.
			if _, err := a.PlanKeyfiles(context.Background(), c.render(t)); err != nil {
				t.Errorf("PlanKeyfiles: %v", err)
			}
		})
	}
}

// The applicator writes our keyfiles at every boot, before the agent runs:
// a file the manifest lists is ours and is replaced, live and persisted.
func TestOwnKeyfileFromTheManifestIsReplaced(t *testing.T) {
	root, stub, a := stubbedRoot(t)
	first := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	if err := a.Persist(first); err != nil {
		t.Fatal(err)
	}
	for _, kf := range first.Keyfiles {
		writeFile(t, root, keyfileDirRel+"/"+kf.Name, string(kf.Content), 0o600)
	}
	second := mustPlan(t, a, renderVector(t, "192.168.122.151"))
	if err := a.ApplyLive(context.Background(), second, nil); err != nil {
		t.Fatalf("ApplyLive over our own keyfiles: %v", err)
	}
	if got := stub.subcommands(t); count(got, "apply") != 1 {
		t.Errorf("calls %v, want one apply", got)
	}
}

// An image installed by elemental-register has its applicator and no
// manifest of ours: the files that applicator rewrites at every boot are
// taken over with it. A manifest that does not parse falls back the same
// way, and planning leaves it where it is.
func TestApplicatorNamedKeyfileIsTakenOver(t *testing.T) {
	for _, manifest := range []string{"", "{not json"} {
		root := t.TempDir()
		writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", foreignKeyfile, 0o600)
		writeFile(t, root, applicatorPath, "name: elemental-register\nstages:\n  initramfs:\n    - files:\n        - path: /etc/NetworkManager/system-connections/eth0.nmconnection\n          permissions: 0600\n          content: x\n", 0o600)
		if manifest != "" {
			writeFile(t, root, "oem/nodereg/network-manifest.json", manifest, 0o600)
		}
		before := testutil.Tree(t, root)
		a := &Applier{Files: host.Root(root)}
		if _, err := a.Plan(context.Background(), renderNmconnections(t, "10.0.0.2")); err != nil {
			t.Errorf("manifest %q: Plan over the applicator's keyfile: %v", manifest, err)
		}
		if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
			t.Errorf("manifest %q: Plan changed the root:\n%s", manifest, d)
		}
	}
	// A manifest of ours that does not list the file: not ours, whatever
	// some applicator says.
	root := t.TempDir()
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", foreignKeyfile, 0o600)
	writeFile(t, root, "oem/nodereg/network-manifest.json", `{"version":1,"files":[{"path":"/etc/NetworkManager/system-connections/eth1.nmconnection","kind":"keyfile"}]}`, 0o600)
	_, err := (&Applier{Files: host.Root(root)}).Plan(context.Background(), renderNmconnections(t, "10.0.0.2"))
	wantNotOwned(t, err, "/"+keyfileDirRel+"/eth0.nmconnection")
}

// A file that appears between plan and apply is refused before anything
// is written or run.
func TestApplyLiveRechecksOwnership(t *testing.T) {
	root, stub, a := stubbedRoot(t)
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	name := p.Keyfiles[0].Name
	writeFile(t, root, keyfileDirRel+"/"+name, foreignKeyfile, 0o600)
	before := testutil.Tree(t, root)
	err := a.ApplyLive(context.Background(), p, nil)
	wantNotOwned(t, err, "/"+keyfileDirRel+"/"+name)
	if got := stub.subcommands(t); !slices.Equal(got, []string{"gc"}) {
		t.Errorf("calls %v after the refusal, want only the plan's gc", got)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
		t.Errorf("a refused apply changed the root:\n%s", d)
	}
}
