package apply

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
)

// cutAfterKeyfile is a persistent /etc after a power cut in a first live
// apply: the intent and the keyfile (whole, or its first n bytes) are on
// disk, nothing else of the change.
func cutAfterKeyfile(t *testing.T, n int) (root string, a *Applier, r *Rendered) {
	t.Helper()
	root = t.TempDir()
	a = &Applier{Files: host.Root(root)}
	r = renderNmconnections(t, "10.0.0.2")
	p := mustPlan(t, a, r)
	if err := a.writeIntent(p); err != nil {
		t.Fatal(err)
	}
	kf := p.Keyfiles[0].Content
	if n < 0 {
		n = len(kf)
	}
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", string(kf[:n]), 0o600)
	return root, a, r
}

func TestIntentOwnsWhatTheCutChangeWrote(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
	}{{"whole", -1}, {"torn", 10}, {"empty", 0}} {
		t.Run(c.name, func(t *testing.T) {
			_, a, r := cutAfterKeyfile(t, c.n)
			p, err := a.Plan(context.Background(), r)
			if err != nil {
				t.Fatalf("plan after the cut: %v", err)
			}
			if err := a.Persist(p); err != nil {
				t.Fatal(err)
			}
			m, err := a.readManifest()
			if err != nil || len(m.Pending) != 0 || !slices.ContainsFunc(m.Files, func(f state.ManifestFile) bool { return f.Path == "/"+keyfileDirRel+"/eth0.nmconnection" }) {
				t.Errorf("manifest after the persist: %+v, %v; want the keyfile owned, nothing pending", m, err)
			}
		})
	}
}

// A file at a path the intent names but holding other bytes was not
// written by the agent: refused as before.
func TestIntentDoesNotOwnOtherBytes(t *testing.T) {
	root, a, r := cutAfterKeyfile(t, -1)
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", foreignKeyfile, 0o600)
	_, err := a.Plan(context.Background(), r)
	wantNotOwned(t, err, "/"+keyfileDirRel+"/eth0.nmconnection")
	// A torn prefix is only recognised against what the plan writes now;
	// the same bytes under another config are not ours.
	root, a, _ = cutAfterKeyfile(t, 10)
	_, err = a.Plan(context.Background(), renderNmconnections(t, "10.0.0.3"))
	wantNotOwned(t, err, "/"+keyfileDirRel+"/eth0.nmconnection")
	_ = root
}

// An intent is only written after Plan refused every foreign target, so a
// server naming an image's profile never gets it into the intent; and an
// entry an intent holds for a path outside the agent's directories (a
// manifest from elsewhere) owns nothing, even with matching bytes.
func TestIntentCannotClaimForeignFiles(t *testing.T) {
	root := t.TempDir()
	a := &Applier{Files: host.Root(root)}
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", foreignKeyfile, 0o600)
	if _, err := a.Plan(context.Background(), renderNmconnections(t, "10.0.0.2")); err == nil {
		t.Fatal("plan over an image's profile went through")
	}
	if _, err := a.Files.Lstat(a.paths().manifestPath()); err == nil {
		t.Fatal("a refused plan wrote an intent")
	}
	writeFile(t, root, "etc/shadow", "root:x:\n", 0o600)
	writeFile(t, root, keyfileDirRel+"/.hidden", foreignKeyfile, 0o600)
	m := state.Manifest{Version: 1, Pending: []state.ManifestFile{
		{Path: "/etc/shadow", Kind: state.KindKeyfile, SHA256: sum([]byte("root:x:\n"))},
		{Path: "/" + keyfileDirRel + "/../../shadow", Kind: state.KindKeyfile, SHA256: sum([]byte("root:x:\n"))},
		{Path: "/" + keyfileDirRel + "/.hidden", Kind: state.KindKeyfile, SHA256: sum([]byte(foreignKeyfile))},
	}}
	b, _ := json.Marshal(m)
	writeFile(t, root, "oem/nodereg/network-manifest.json", string(b), 0o600)
	if got := a.ownedNow(&m); len(got) != 0 {
		t.Errorf("owned from a hostile intent: %+v", got)
	}
	if _, err := a.RemoveNetwork(context.Background()); err != nil {
		t.Logf("reset: %v", err) // no nmcli here: only the files matter
	}
	if readFile(t, root, "etc/shadow") == "" || readFile(t, root, keyfileDirRel+"/.hidden") == "" {
		t.Error("reset removed a file an intent named outside what the agent owns")
	}
}

// Reset after a cut: the keyfile the change wrote goes, a file of other
// bytes at a path the intent names stays.
func TestResetRemovesWhatTheCutChangeWrote(t *testing.T) {
	_, a, _ := cutAfterKeyfile(t, -1)
	if _, err := a.RemoveNetwork(context.Background()); err != nil {
		t.Logf("reset: %v", err)
	}
	if _, err := a.Files.Lstat("/" + keyfileDirRel + "/eth0.nmconnection"); err == nil {
		t.Error("reset left the keyfile the cut change wrote")
	}
	root, a, _ := cutAfterKeyfile(t, -1)
	writeFile(t, root, keyfileDirRel+"/eth0.nmconnection", foreignKeyfile, 0o600)
	if _, err := a.RemoveNetwork(context.Background()); err != nil {
		t.Logf("reset: %v", err)
	}
	if readFile(t, root, keyfileDirRel+"/eth0.nmconnection") != foreignKeyfile {
		t.Error("reset removed a file the intent names but the agent did not write")
	}
}

// A manifest torn while a change writes its intent is kept aside: the
// keyfiles the applicator names are still the agent's, in the new intent
// and for the stale removal, or the old profile would stay beside the new.
func TestIntentWithoutManifestKeepsApplicatorFiles(t *testing.T) {
	root := t.TempDir()
	a := &Applier{Files: host.Root(root)}
	if err := a.Persist(mustPlan(t, a, renderNmconnections(t, "10.0.0.2"))); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "oem/nodereg/network-manifest.json", `{"version": 1, "fi`, 0o600)
	old, err := a.readManifest()
	if err != nil || !old.Corrupt {
		t.Fatalf("torn manifest read as %+v, %v", old, err)
	}
	want := "/" + keyfileDirRel + "/eth0.nmconnection"
	has := func(fs []state.ManifestFile) bool {
		return slices.ContainsFunc(fs, func(f state.ManifestFile) bool { return f.Path == want })
	}
	if !has(a.ownedBefore(old)) {
		t.Errorf("owned before the change: %+v, want %s", a.ownedBefore(old), want)
	}
	if err := a.writeIntent(mustPlan(t, a, renderNmconnections(t, "10.0.0.3"))); err != nil {
		t.Fatal(err)
	}
	m, err := a.readManifest()
	if err != nil || !has(m.Files) {
		t.Errorf("intent %+v, %v: want %s among the owned files", m, err, want)
	}
}
