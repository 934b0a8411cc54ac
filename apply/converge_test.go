package apply

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

// The convergence of the nmstatectl way against a real NetworkManager
// (docs/apply.md, "nmstatectl: converging on the next boot"). What
// `nmstatectl apply` has NetworkManager do is done here through nmcli,
// which asks NetworkManager the same over D-Bus, so the keyfiles on disk
// are NetworkManager's own bytes: a profile it creates gets a UUID it draws
// and its own format, under the profile's name (transcripts 06, 07, 23);
// a profile renamed is modified in place, its file name kept (25, 26).
// The device is a bridge without ports, which NetworkManager creates and
// activates itself in the lab's namespace (the development machine's
// kernel has no dummy interfaces).

const convDev = "nrbr5"

// convState is an nmstate state for the dummy device under a profile name.
func convState(profile, addr string) []byte {
	return []byte(`interfaces:
- name: ` + convDev + `
  type: linux-bridge
  profile-name: ` + profile + `
  state: up
  bridge:
    options:
      stp:
        enabled: false
    port: []
  ipv4:
    enabled: true
    dhcp: false
    address:
    - ip: ` + addr + `
      prefix-length: 24
  ipv6:
    enabled: false
`)
}

type convLab struct {
	*nmLab
	root string
	a    *Applier
}

func newConvLab(t *testing.T) *convLab {
	root := t.TempDir()
	lab := startNM(t, filepath.Join(root, keyfileDirRel))
	return &convLab{nmLab: lab, root: root,
		a: &Applier{Files: host.Root(root), Env: lab.env, Nmstate: NmstateBuiltin, Log: testutil.TestLog(t)}}
}

func (l *convLab) plan(t *testing.T, profile, addr string) *Plan {
	t.Helper()
	p := mustPlan(t, l.a, &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: convState(profile, addr)})
	if len(p.Keyfiles) != 1 {
		t.Fatalf("keyfiles %v", p.Keyfiles)
	}
	return p
}

// applied puts p on the node the way a finished apply leaves it: its
// keyfile loaded and active, the manifest owning it.
func (l *convLab) applied(t *testing.T, p *Plan) {
	t.Helper()
	writeFile(t, l.root, keyfileDirRel+"/"+p.Keyfiles[0].Name, string(p.Keyfiles[0].Content), 0o600)
	testutil.Must(t, l.a.Persist(p))
	l.nmcli(t, "connection", "reload")
	l.nmcli(t, "connection", "up", "uuid", keyfileUUID(p.Keyfiles[0].Content))
}

// starting is what applyNmstate does before nmstatectl's apply.
func (l *convLab) starting(t *testing.T, p *Plan) *convergence {
	t.Helper()
	c, err := l.a.newConvergence(context.Background(), p, l.a.log())
	if err != nil || c == nil {
		t.Fatalf("newConvergence: %v %v", c, err)
	}
	testutil.Must(t, l.a.writeIntent(p))
	return c
}

func (l *convLab) keyfiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(l.root, keyfileDirRel))
	testutil.Must(t, err)
	for _, e := range entries {
		out[e.Name()] = readFile(t, l.root, keyfileDirRel+"/"+e.Name())
	}
	return out
}

// converged checks the node holds exactly the plan's profile for the
// device: one profile, the plan's UUID, its file holding the plan's bytes,
// active, and nothing else in the keyfile directory.
func (l *convLab) converged(t *testing.T, label string, p *Plan) {
	t.Helper()
	kf := p.Keyfiles[0]
	uuid := keyfileUUID(kf.Content)
	file := filepath.Join(l.root, keyfileDirRel, kf.Name)
	if got := l.profilesOf(t, convDev); len(got) != 1 || got[uuid] != file {
		t.Errorf("%s: NetworkManager's profiles for %s are %v, want only %s in %s", label, convDev, got, uuid, file)
	}
	if got := l.keyfiles(t); len(got) != 1 || got[kf.Name] != string(kf.Content) {
		t.Errorf("%s: keyfile directory holds %v, want only %s with the plan's bytes", label, keys(got), kf.Name)
	}
	if !l.active(t)[uuid] {
		t.Errorf("%s: the plan's profile %s is not active", label, uuid)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A first apply: nmstatectl has NetworkManager create a profile of its own
// for the device (random UUID, address1=, addr-gen-mode=eui64, [proxy]).
// After the convergence the node holds the plan's profile only, the one
// the applicator writes at every boot, and the intent had recorded
// NetworkManager's bytes first, so a power cut in between would have left
// them ours.
func TestConvergeFirstApply(t *testing.T) {
	l := newConvLab(t)
	p := l.plan(t, "nrnode0", "192.0.2.10")
	c := l.starting(t, p)

	l.nmcli(t, "connection", "add", "type", "bridge", "ifname", convDev, "con-name", "nrnode0", "bridge.stp", "no",
		"ipv4.method", "manual", "ipv4.addresses", "192.0.2.10/24", "ipv6.method", "disabled")
	l.nmcli(t, "connection", "up", "nrnode0")
	nmBytes := readFile(t, l.root, keyfileDirRel+"/nrnode0.nmconnection")
	nmUUID := keyfileUUID([]byte(nmBytes))
	if nmUUID == "" || nmUUID == keyfileUUID(p.Keyfiles[0].Content) || !strings.Contains(nmBytes, "address1=192.0.2.10/24") {
		t.Fatalf("NetworkManager did not write a keyfile of its own:\n%s", nmBytes)
	}

	if step, err := c.converge(context.Background()); err != nil {
		t.Fatalf("converge: %s: %v", step, err)
	}
	l.converged(t, "after the convergence", p)
	if got := l.profilesOf(t, convDev); got[nmUUID] != "" {
		t.Errorf("NetworkManager's own profile %s is still there", nmUUID)
	}
	m, err := state.ReadManifest(l.a.files(), l.a.paths().manifestPath())
	testutil.Must(t, err)
	recorded := false
	for _, f := range m.Pending {
		recorded = recorded || f.Path == "/"+keyfileDirRel+"/nrnode0.nmconnection" && f.SHA256 == sum([]byte(nmBytes))
	}
	if !recorded {
		t.Errorf("the intent does not record NetworkManager's bytes: %+v", m.Pending)
	}
	testutil.Must(t, l.a.Persist(p))
	if m, _ := state.ReadManifest(l.a.files(), l.a.paths().manifestPath()); len(m.Pending) != 0 {
		t.Errorf("the persisted manifest still has an intent: %+v", m.Pending)
	}
}

// A same-boot rename (transcripts 25, 26): nmstatectl modifies the active
// profile in place, so nrnode0.nmconnection holds id=nrnode1 while the
// plan's keyfile is nrnode1.nmconnection. After the convergence there is no
// second profile: nrnode1's, with the plan's UUID, and no nrnode0 file.
// --reset-network then leaves no profile of ours in NetworkManager.
func TestConvergeSameBootRename(t *testing.T) {
	l := newConvLab(t)
	old := l.plan(t, "nrnode0", "192.0.2.10")
	l.applied(t, old)
	oldUUID := keyfileUUID(old.Keyfiles[0].Content)
	p := l.plan(t, "nrnode1", "192.0.2.10")
	c := l.starting(t, p)

	l.nmcli(t, "connection", "modify", "uuid", oldUUID, "connection.id", "nrnode1")
	l.nmcli(t, "connection", "up", "uuid", oldUUID)
	renamed := readFile(t, l.root, keyfileDirRel+"/nrnode0.nmconnection")
	if !strings.Contains(renamed, "id=nrnode1\n") || !strings.Contains(renamed, "uuid="+oldUUID) {
		t.Fatalf("NetworkManager did not modify the profile in place:\n%s", renamed)
	}

	if step, err := c.converge(context.Background()); err != nil {
		t.Fatalf("converge: %s: %v", step, err)
	}
	l.converged(t, "after the rename", p)
	testutil.Must(t, l.a.Persist(p))

	removed, err := l.a.RemoveNetwork(context.Background())
	if err != nil {
		t.Fatalf("RemoveNetwork: %v (removed %v)", err, removed)
	}
	if got := l.profilesOf(t, convDev); len(got) != 0 {
		t.Errorf("after --reset-network NetworkManager still has %v for %s", got, convDev)
	}
	if got := l.keyfiles(t); len(got) != 0 {
		t.Errorf("after --reset-network the keyfile directory holds %v", keys(got))
	}
}

// A rollback (transcript 11 and NetworkManager's checkpoint): the checkpoint
// is taken first, as nmstatectl does, the apply modifies the live profile
// in place and the convergence replaces it; NetworkManager's rollback then
// rewrites the restored profile in its own format (or re-adds it under a
// name of its choosing) and deletes the new one. undo leaves the previous
// bytes: the keyfile directory as before the apply, byte for byte, one
// profile for the device, the previous one, active.
func TestConvergeRollbackLeavesThePreviousBytes(t *testing.T) {
	for _, tc := range []struct{ name, profile string }{
		{"same profile", "nrnode0"},
		{"renamed profile", "nrnode1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newConvLab(t)
			old := l.plan(t, "nrnode0", "192.0.2.10")
			l.applied(t, old)
			oldUUID := keyfileUUID(old.Keyfiles[0].Content)
			before := testutil.Tree(t, l.root)
			manifestRel := strings.TrimPrefix(l.a.paths().manifestPath(), "/")
			manifestBefore := readFile(t, l.root, manifestRel)
			p := l.plan(t, tc.profile, "192.0.2.11")
			c := l.starting(t, p)
			cp := l.checkpoint(t)

			l.nmcli(t, "connection", "modify", "uuid", oldUUID, "connection.id", tc.profile, "ipv4.addresses", "192.0.2.11/24")
			l.nmcli(t, "connection", "up", "uuid", oldUUID)
			if step, err := c.converge(context.Background()); err != nil {
				t.Fatalf("converge: %s: %v", step, err)
			}
			l.converged(t, "before the rollback", p)

			l.rollback(t, cp)
			rewritten := l.keyfiles(t)
			testutil.Must(t, c.undo(context.Background()))
			// The intent is the applier's to restore (applyNmstate's
			// snapshot of the persisted files); only the keyfiles here.
			writeFile(t, l.root, manifestRel, manifestBefore, 0o600)
			if d := testutil.TreeDiff(before, testutil.Tree(t, l.root)); d != "" {
				t.Errorf("the node after the rollback differs from before the apply (NetworkManager left %v):\n%s", keys(rewritten), d)
			}
			if got := l.profilesOf(t, convDev); len(got) != 1 || got[oldUUID] == "" {
				t.Errorf("profiles for %s after the rollback: %v, want only the previous %s", convDev, got, oldUUID)
			}
			if !l.active(t)[oldUUID] {
				t.Errorf("the previous profile is not active after the rollback")
			}
			if !bytes.Equal([]byte(l.keyfiles(t)[old.Keyfiles[0].Name]), old.Keyfiles[0].Content) {
				t.Errorf("the previous keyfile's bytes are not back")
			}
		})
	}
}

// A power cut after NetworkManager wrote its own profile and the intent
// recorded it, before the agent replaced it: with /etc kept, the next
// run's --reset-network removes NetworkManager's file, whatever its name
// and bytes, since the intent records exactly those; a foreign keyfile
// stays.
func TestResetRemovesNetworkManagersFileTheIntentRecorded(t *testing.T) {
	l := newConvLab(t)
	writeFile(t, l.root, keyfileDirRel+"/admin.nmconnection", "[connection]\nid=admin\nuuid=5d3b2f8e-8f44-4d0a-9c55-1e0f0c7a2b11\ntype=dummy\ninterface-name=nradm0\n", 0o600)
	p := l.plan(t, "nrnode0", "192.0.2.10")
	c := l.starting(t, p)
	l.nmcli(t, "connection", "add", "type", "bridge", "ifname", convDev, "con-name", "nrnode0", "bridge.stp", "no",
		"ipv4.method", "manual", "ipv4.addresses", "192.0.2.10/24", "ipv6.method", "disabled")
	nmFile := keyfileDirRel + "/nrnode0.nmconnection"
	nmBytes := readFile(t, l.root, nmFile)
	testutil.Must(t, l.a.recordWritten(snapshot{"/" + nmFile: []byte(nmBytes)}))
	_ = c

	// The agent of the next boot: plan (the file is ours), then reset.
	if _, err := l.a.Plan(context.Background(), &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: convState("nrnode0", "192.0.2.10")}); err != nil {
		t.Fatalf("the next plan refuses NetworkManager's file the intent recorded: %v", err)
	}
	if _, err := l.a.RemoveNetwork(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := l.keyfiles(t); len(got) != 1 || got["admin.nmconnection"] == "" {
		t.Errorf("after --reset-network the keyfile directory holds %v, want only the admin's", keys(got))
	}
	if got := l.profilesOf(t, convDev); len(got) != 0 {
		t.Errorf("after --reset-network NetworkManager still has %v for %s", got, convDev)
	}
}

// A profile that is not ours, which nmstatectl rewrote (a foreign profile
// of a device the config names) or deleted (`state: absent`): the
// convergence gives a rewritten one its bytes back, and after
// NetworkManager's rollback, which rewrites or re-adds it in its own
// format, undo leaves the admin's bytes and one profile for its device.
func TestConvergeForeignProfileKeepsItsBytes(t *testing.T) {
	const adminDev = "nrbr6"
	admin := "[connection]\nid=admin\nuuid=5d3b2f8e-8f44-4d0a-9c55-1e0f0c7a2b11\ntype=bridge\ninterface-name=" + adminDev +
		"\n\n[bridge]\nstp=false\n\n[ipv4]\nmethod=manual\naddress1=192.0.2.20/24\n\n[ipv6]\nmethod=disabled\n"
	const adminUUID = "5d3b2f8e-8f44-4d0a-9c55-1e0f0c7a2b11"
	for _, tc := range []struct {
		name string
		do   []string // what nmstatectl has NetworkManager do to the admin's profile
	}{
		{"rewritten", []string{"connection", "modify", "uuid", adminUUID, "ipv4.addresses", "192.0.2.21/24"}},
		{"deleted", []string{"connection", "delete", "uuid", adminUUID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newConvLab(t)
			writeFile(t, l.root, keyfileDirRel+"/admin.nmconnection", admin, 0o600)
			l.nmcli(t, "connection", "reload")
			l.nmcli(t, "connection", "up", "uuid", adminUUID)
			testutil.Must(t, os.MkdirAll(filepath.Join(l.root, "oem"), 0o755))
			before := testutil.Tree(t, l.root)
			p := l.plan(t, "nrnode0", "192.0.2.10")
			c := l.starting(t, p)
			cp := l.checkpoint(t)

			l.nmcli(t, tc.do...)
			if step, err := c.converge(context.Background()); err != nil {
				t.Fatalf("converge: %s: %v", step, err)
			}
			if got, ok := l.keyfiles(t)["admin.nmconnection"]; tc.name == "rewritten" && (!ok || got != admin) {
				t.Errorf("after the convergence the admin's keyfile is\n%s\nwant its own bytes", got)
			}

			l.rollback(t, cp)
			testutil.Must(t, c.undo(context.Background()))
			testutil.Must(t, os.RemoveAll(filepath.Join(l.root, "oem", "nodereg"))) // the intent: applyNmstate's to undo
			if d := testutil.TreeDiff(before, testutil.Tree(t, l.root)); d != "" {
				t.Errorf("the node after the rollback differs from before the apply:\n%s", d)
			}
			if got := l.profilesOf(t, adminDev); len(got) != 1 || got[adminUUID] == "" {
				t.Errorf("profiles for %s after the rollback: %v, want only the admin's", adminDev, got)
			}
			if got := l.profilesOf(t, convDev); len(got) != 0 {
				t.Errorf("profiles for %s after the rollback: %v, want none", convDev, got)
			}
		})
	}
}
