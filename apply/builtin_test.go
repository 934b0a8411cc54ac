package apply

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/nmstate"
	"github.com/nodereg/nodereg/protocol"
)

const noNmstatectl = "/nonexistent/nmstatectl"

// The generator each choice takes, with and without an nmstatectl; the
// stand-in's call log shows whether the tool ran.
func TestNmstateChoice(t *testing.T) {
	cases := []struct {
		choice     NmstateChoice
		nmstatectl bool
		want       string // generator, or "missing" for a host.ToolMissingError
	}{
		{"", true, GeneratorNmstatectl},
		{NmstateAuto, true, GeneratorNmstatectl},
		{NmstateAuto, false, GeneratorBuiltin},
		{"", false, GeneratorBuiltin},
		{NmstateBuiltin, true, GeneratorBuiltin},
		{NmstateBuiltin, false, GeneratorBuiltin},
		{NmstateNmstatectl, true, GeneratorNmstatectl},
		{NmstateNmstatectl, false, "missing"},
	}
	for _, tc := range cases {
		t.Run(string(tc.choice)+map[bool]string{true: "/with-nmstatectl", false: "/without"}[tc.nmstatectl], func(t *testing.T) {
			stub := newStub(t)
			a := stub.applier(t.TempDir())
			a.Nmstate = tc.choice
			if !tc.nmstatectl {
				a.Tools.Nmstatectl = noNmstatectl
			}
			p, err := a.Plan(context.Background(), renderVector(t, "192.168.122.150"))
			if tc.want == "missing" {
				var tm *host.ToolMissingError
				if !errors.As(err, &tm) || tm.Tool != "nmstatectl" {
					t.Fatalf("want host.ToolMissingError nmstatectl, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Generator != tc.want {
				t.Fatalf("generator %q, want %q", p.Generator, tc.want)
			}
			calls := stub.subcommands(t)
			var out bytes.Buffer
			p.Print(&out)
			switch tc.want {
			case GeneratorBuiltin:
				if len(calls) != 0 || len(p.Ran) != 0 {
					t.Errorf("the built-in ran commands: log %v, plan %v", calls, p.Ran)
				}
				if !strings.Contains(out.String(), "# keyfiles by the built-in nmstate translator (matches nmstatectl gc of nmstate "+nmstate.MatchedVersion+")") {
					t.Errorf("plan does not say the built-in made the keyfiles:\n%s", out.String())
				}
				// Applied the keyfile way: nmcli, no nmstatectl.
				if len(p.Live) == 0 || strings.Contains(out.String(), "nmstatectl apply") || !strings.Contains(out.String(), "nmcli connection up uuid") {
					t.Errorf("live commands are not the keyfile way: %v", p.Live)
				}
			case GeneratorNmstatectl:
				if !reflect.DeepEqual(calls, []string{"gc"}) {
					t.Errorf("planning ran %v, want gc", calls)
				}
				if !strings.Contains(out.String(), "# keyfiles by nmstatectl gc") || !strings.Contains(out.String(), "apply --no-commit") {
					t.Errorf("plan does not say nmstatectl:\n%s", out.String())
				}
			}
		})
	}
	a := &Applier{Files: host.Root(t.TempDir()), Nmstate: "nmstate-rs"}
	var fe *FieldError
	if _, err := a.Plan(context.Background(), renderVector(t, "192.168.122.150")); !errors.As(err, &fe) || !strings.Contains(err.Error(), `"nmstate-rs"`) {
		t.Errorf("a bad choice: want a FieldError naming it, got %v", err)
	}
}

// The seed template through the built-in: the [ipv4] the IPAM design
// documents (docs/protocol.md §7.1), and no command run.
func TestBuiltinSeedTemplate(t *testing.T) {
	a := &Applier{Files: host.Root(t.TempDir()), Tools: host.Tools{Nmstatectl: noNmstatectl}}
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	if len(p.Keyfiles) != 1 || p.Keyfiles[0].Name != "enp1s0.nmconnection" {
		t.Fatalf("keyfiles %v", p.Keyfiles)
	}
	kf := string(p.Keyfiles[0].Content)
	for _, want := range []string{"address0=192.168.122.150/24\n", "route0=0.0.0.0/0,192.168.122.1,150\n", "route0_options=table=254\n", "dns=192.168.122.1\n"} {
		if !strings.Contains(kf, "\n[ipv4]\n") || !strings.Contains(kf, want) {
			t.Errorf("keyfile lacks %q:\n%s", want, kf)
		}
	}
}

// What the built-in refuses is a FieldError naming the key under config,
// keeping the nmstate.Error (and ErrUnsupported for what only it refuses);
// nothing is written.
func TestBuiltinRefusalNamesKey(t *testing.T) {
	cases := []struct {
		state       string
		path        string
		unsupported bool
	}{
		{"interfaces:\n- {name: eth0, type: ethernet, ipv4: {enabled: true, address: [{ip: 10.0.0.2}]}}\n", "config.interfaces[0].ipv4.address[0]", false},
		{"interfaces:\n- {name: wg0, type: wireguard}\n", "config.interfaces[0].type", true},
	}
	for _, tc := range cases {
		root := t.TempDir()
		r := &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: []byte(tc.state)}
		a := &Applier{Files: host.Root(root), Nmstate: NmstateBuiltin}
		_, err := a.Plan(context.Background(), r)
		var fe *FieldError
		var ne *nmstate.Error
		if !errors.As(err, &fe) || !errors.As(err, &ne) {
			t.Fatalf("%s: want FieldError wrapping nmstate.Error, got %v", tc.path, err)
		}
		if !strings.HasPrefix(fe.Path, tc.path) {
			t.Errorf("path %q, want %q…", fe.Path, tc.path)
		}
		if got := errors.Is(err, nmstate.ErrUnsupported); got != tc.unsupported {
			t.Errorf("%s: ErrUnsupported %v, want %v (%v)", tc.path, got, tc.unsupported, err)
		}
		if tc.unsupported && !strings.Contains(err.Error(), "--nmstate=nmstatectl") {
			t.Errorf("an unsupported input should say how to use nmstatectl: %v", err)
		}
		if entries, _ := os.ReadDir(root); len(entries) != 0 {
			t.Errorf("wrote %v", entries)
		}
	}
}

// Whichever generator made them, an nmstate config is persisted, listed
// and reset the same way: the same digest, digested config, file paths and
// manifest entries, an applicator that is a function of the keyfiles alone,
// and a ResetNetwork that removes every file either wrote. (The stand-in's
// gc writes nmstate's layout only roughly, so keyfile bytes may differ;
// the built-in's bytes are checked against nmstate's vectors in nmstate/.)
func TestSameFilesWhicheverGenerator(t *testing.T) {
	r := renderVector(t, "192.168.122.150")
	stub := newStub(t)
	gcA := stub.applier(t.TempDir())
	byGC := mustPlan(t, gcA, r)
	biA := &Applier{Files: host.Root(t.TempDir()), Nmstate: NmstateBuiltin}
	byBuiltin := mustPlan(t, biA, r)
	if byGC.Generator != GeneratorNmstatectl || byBuiltin.Generator != GeneratorBuiltin {
		t.Fatalf("generators %q %q", byGC.Generator, byBuiltin.Generator)
	}
	names := func(p *Plan) (n []string) {
		for _, kf := range p.Keyfiles {
			n = append(n, kf.Name)
		}
		return n
	}
	if !reflect.DeepEqual(names(byGC), names(byBuiltin)) {
		t.Fatalf("keyfile names differ: %v vs %v", names(byGC), names(byBuiltin))
	}
	if byGC.Digest() != byBuiltin.Digest() {
		t.Errorf("digest depends on the generator: %s vs %s", byGC.Digest(), byBuiltin.Digest())
	}
	for _, p := range []*Plan{byGC, byBuiltin} {
		want, err := buildApplicator(p.paths.KeyfileDir, p.Keyfiles)
		if err != nil || !bytes.Equal(want, p.Applicator) {
			t.Errorf("%s: the applicator is not the keyfiles' alone (%v)", p.Generator, err)
		}
	}
	pg, err := byGC.Persisted()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := byBuiltin.Persisted()
	if err != nil {
		t.Fatal(err)
	}
	if len(pg) != 3 || len(pb) != 3 || pg[0].Path != pb[0].Path || !bytes.Equal(pg[0].Content, pb[0].Content) || pg[1].Path != pb[1].Path || pg[2].Path != pb[2].Path {
		t.Fatalf("persisted files differ with the generator: %v / %v", pg, pb)
	}
	mg, mb := byGC.manifest(), byBuiltin.manifest()
	if mg.Digest != mb.Digest || mg.Configurator != mb.Configurator || len(mg.Files) != len(mb.Files) {
		t.Fatalf("manifests differ: %+v / %+v", mg, mb)
	}
	for i := range mg.Files {
		if mg.Files[i].Path != mb.Files[i].Path || mg.Files[i].Kind != mb.Files[i].Kind {
			t.Errorf("manifest entry %d: %+v / %+v", i, mg.Files[i], mb.Files[i])
		}
	}
	// Persisted by each: the same files with the same modes.
	if err := gcA.Persist(byGC); err != nil {
		t.Fatal(err)
	}
	if err := biA.Persist(byBuiltin); err != nil {
		t.Fatal(err)
	}
	tg, tb := testutil.Tree(t, gcA.Files.Path("/")), testutil.Tree(t, biA.Files.Path("/"))
	if !reflect.DeepEqual(slices.Sorted(maps.Keys(tg)), slices.Sorted(maps.Keys(tb))) {
		t.Errorf("persisted trees differ: %v / %v", slices.Sorted(maps.Keys(tg)), slices.Sorted(maps.Keys(tb)))
	}
	// The keyfile as the applicator writes it at boot, then a reset.
	writeFile(t, biA.Files.Path("/"), keyfileDirRel+"/"+byBuiltin.Keyfiles[0].Name, string(byBuiltin.Keyfiles[0].Content), 0o600)
	biA.Tools.Nmcli = "/nonexistent/nmcli"
	files, err := biA.RemoveNetwork(context.Background())
	var re *ReloadError
	if err != nil && !errors.As(err, &re) {
		t.Fatal(err)
	}
	for _, f := range []string{applicatorPath, path.Join(keyfileDirRel, byBuiltin.Keyfiles[0].Name), "oem/nodereg/network-config.nmstate", "oem/nodereg/network-manifest.json"} {
		if _, err := os.Stat(biA.host("/" + f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after reset: %v", f, err)
		}
	}
	if len(files) != 4 {
		t.Errorf("RemoveNetwork reported %d files, want 4: %v", len(files), files)
	}
}

// Keyfiles of the built-in go live the keyfile way on a real
// NetworkManager, never through nmstatectl even when it is installed: the
// seed's enp1s0 does not exist in the lab, so activation fails and the
// previous files come back.
func TestApplyLiveBuiltinGoesKeyfileWay(t *testing.T) {
	root := t.TempDir()
	lab := startNM(t, path.Join(root, keyfileDirRel))
	writeFile(t, root, applicatorPath, "name: previous\n", 0o600)
	before := testutil.Tree(t, root)
	stub := newStub(t)
	a := stub.applier(root, lab.env...)
	a.Nmstate = NmstateBuiltin
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	err := a.ApplyLive(context.Background(), p, nil)
	if !errors.Is(err, ErrRolledBack) || !strings.Contains(err.Error(), "connection up") {
		t.Fatalf("want a rolled-back connection up failure, got %v", err)
	}
	if calls := stub.subcommands(t); len(calls) != 0 {
		t.Errorf("nmstatectl ran: %v", calls)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, root)); d != "" {
		t.Errorf("root not restored:\n%s", d)
	}
}

// nmstate's `state: down` is a keyfile with autoconnect=false: the keyfile
// way loads it and does not bring it up (a boot would not either), so a
// profile for a device that is not there does not fail the apply.
func TestApplyLiveBuiltinLeavesDownProfilesDown(t *testing.T) {
	root := t.TempDir()
	lab := startNM(t, path.Join(root, keyfileDirRel))
	a := &Applier{Files: host.Root(root), Env: lab.env, Nmstate: NmstateBuiltin}
	r := &Rendered{Configurator: protocol.ConfiguratorNmstate, Digested: []byte("interfaces:\n- {name: eth9, type: ethernet, state: down}\n")}
	p := mustPlan(t, a, r)
	if len(p.Keyfiles) != 1 || !strings.Contains(string(p.Keyfiles[0].Content), "autoconnect=false\n") {
		t.Fatalf("keyfiles %v", p.Keyfiles)
	}
	for _, c := range p.Live {
		if slices.Contains(c.Args, "up") {
			t.Errorf("the plan brings a down profile up: %s", c)
		}
	}
	if err := a.ApplyLive(context.Background(), p, nil); err != nil {
		t.Fatalf("ApplyLive: %v", err)
	}
	if got := lab.profiles(t); !slices.Contains(got, "eth9") {
		t.Errorf("NetworkManager profiles %v lack eth9", got)
	}
	if _, err := os.Stat(a.host("/" + applicatorPath)); err != nil {
		t.Errorf("not persisted: %v", err)
	}
}
