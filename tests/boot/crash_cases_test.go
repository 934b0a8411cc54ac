//go:build bootsim

package boot

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/tpm/tpmtest"
)

// crashMode is one machine of the crash cases: its /etc wiped at boot
// (Elemental) or kept, and its identity (mac, or swtpm: the TPM keeps its
// persistent EK and SRK across the cut, the AK blob is in the state file).
type crashMode struct {
	name string
	keep bool
	tpm  bool
}

var crashModes = []crashMode{
	{"ephemeral /etc", false, false},
	{"kept /etc", true, false},
	{"tpm, kept /etc", true, true},
}

func (mode crashMode) testName() string {
	return strings.NewReplacer(" ", "-", ",", "").Replace(mode.name)
}

// cutsFor are the cut points mode boots: all of them, or with the TPM
// every prefix and the torn state file (the AK is only in the state file:
// every cut before it reaches the disk loses the AK).
func (mode crashMode) cutsFor(ops []durableOp) []cut {
	all := cutPoints(ops)
	if !mode.tpm {
		return all
	}
	var out []cut
	for _, c := range all {
		if c.variant == cutClean || strings.HasSuffix(ops[c.k].Path, "/state.yaml") {
			out = append(out, c)
		}
	}
	return out
}

// convergence is what the boot after every cut must reach.
type convergence struct {
	auth   string
	claims map[string]string // claim name -> address, as the recorded run left them
	// keyfile is the name (without .nmconnection) of the one keyfile the
	// manifest owns; gone are keyfiles that must not be there.
	keyfile string
	gone    []string
	// before is an address the NIC carries before the agent runs, from
	// the keyfiles of the old or the new config (a live change); "" for a
	// first apply, where nothing of ours may come up yet.
	before string
}

// A power cut at any moment of a first boot's apply: the first boot runs
// the crashrec build of the agent, which records every durable operation;
// then, for every prefix of that sequence (and, for each write, its temp
// file left, or its target torn where a rename is not atomic), the node's
// disk is put in that state, the node boots (its /etc wiped or kept) and
// the agent's own build runs once. Every cut must converge without a
// person (convergence). docs/apply.md, "Crash consistency".
func TestCrashFirstApply(t *testing.T) {
	for _, mode := range crashModes {
		t.Run(mode.testName(), func(t *testing.T) {
			t.Parallel()
			crashFirstApply(t, mode)
		})
	}
}

func crashFirstApply(t *testing.T, mode crashMode) {
	r := newReport(t, "crash: first apply cut, "+mode.name)
	cfg := serverConfig(keyfileTemplate)
	if mode.tpm {
		cfg = strings.Replace(cfg, "auth: mac", "auth: tpm", 1)
	}
	m := newMachine(t, cfg)
	if mode.tpm {
		m.writeConfig("auth: tpm", "tpm-device: "+tpmtest.StartSwtpm(t, false).Device())
	}
	m.keepEtc = mode.keep
	start := m.boot(active, true)
	initial, ops := m.record(t)
	want := convergence{auth: m.inventories()[0].AuthKind, claims: map[string]string{"inventory-ip": m.claimed("inventory-ip")}, keyfile: nodeIf}
	if mode.tpm && want.auth != "tpm" {
		t.Fatalf("recorded first boot registered with %q, want tpm", want.auth)
	}
	r.boot("first", m.waitAddr(start, cidr(want.claims["inventory-ip"])))
	m.crashAll(t, "first apply, "+mode.name, initial, ops, mode.cutsFor(ops), want)
}

// A power cut at any moment of a live change (the update timer's run after
// the server's template changed to a new profile name, a second address
// and a route): the next boot must bring up working addresses before the
// agent runs (the old config's or the new one's: both hold the first
// address) and the agent must finish the change.
func TestCrashLiveChange(t *testing.T) {
	for _, mode := range crashModes[:2] {
		t.Run(mode.testName(), func(t *testing.T) {
			r, m := keyfileNode(t, "crash: live change cut, "+mode.name)
			m.keepEtc = mode.keep
			addr := firstBoot(t, m, r)
			m.startServer(serverConfig(changedTemplate))
			m.waitAddr(m.boot(active, false), cidr(addr))
			initial, ops := m.record(t)
			want := convergence{auth: m.inventories()[0].AuthKind, keyfile: nodeIf + "-v2", gone: []string{nodeIf}, before: cidr(addr),
				claims: map[string]string{"inventory-ip": addr, "second-ip": m.claimed("second-ip")}}
			m.crashAll(t, "live change, "+mode.name, initial, ops, cutPoints(ops), want)
		})
	}
}

// record runs the crashrec build of the agent once and returns the disk as
// it found it and the durable operations it made.
func (m *machine) record(t *testing.T) (map[string]entry, []durableOp) {
	t.Helper()
	initial := saveTree(t, m)
	prod := m.agent
	m.agent = testbin.Build(t, "./cmd/agent", "crashrec")
	defer func() { m.agent = prod }()
	log := filepath.Join(m.dir, "durable.jsonl")
	must(t, os.RemoveAll(log))
	if res := m.runAgent([]string{"NODEREG_CRASHREC_LOG=" + log}); res.code != 0 {
		t.Fatalf("recorded run: agent exit %d, want 0", res.code)
	}
	ops := readOps(t, log)
	for i, op := range ops {
		t.Logf("durable operation %d: %s (%d bytes)", i+1, op, len(op.Data))
	}
	return initial, ops
}

// crashAll boots every cut of cuts once (a disk already booted is not
// booted again) and reports each outcome on a line of its own.
func (m *machine) crashAll(t *testing.T, name string, initial map[string]entry, ops []durableOp, cuts []cut, want convergence) {
	states := map[string]string{}
	var failed []string
	for _, c := range cuts {
		replay(t, m, initial, ops, c)
		what := c.describe(ops)
		seen := m.seen(t)
		if prev, ok := states[seen]; ok {
			fmt.Printf("crash: %s: %s: the same disk as %s, not booted again\n", name, what, prev)
			continue
		}
		states[seen] = what
		m.tolerateStage = c.torn()
		problems := m.converges(t, c, want)
		outcome := "converged"
		if len(problems) > 0 {
			outcome = "FAILED: " + strings.Join(problems, "; ")
			failed = append(failed, what)
			t.Errorf("%s: %s", what, strings.Join(problems, "; "))
		}
		fmt.Printf("crash: %s: %s: next boot %s\n", name, what, outcome)
	}
	fmt.Printf("crash: %s: %d operations, %d cut points, %d distinct disks booted, %d failed\n",
		name, len(ops), len(cuts), len(states), len(failed))
}

// converges boots the node after cut c and runs the agent once; it returns
// what does not hold of: the address of want.before up before the agent
// (but after a torn write), exit 0, the one inventory with the same
// claims, their addresses on the NIC, keyfile and applicator holding
// them, the old keyfiles gone, /oem whole (oemWhole), verify exit 0.
func (m *machine) converges(t *testing.T, c cut, want convergence) []string {
	t.Helper()
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	// The network answers DHCP where NetworkManager brings up no profile
	// of ours: the bootstrap address stands for it. Put there before
	// NetworkManager starts it would make the NIC "external", and our
	// profile would not come up (the first boot only has that).
	start := m.boot(active, false)
	if m.stageErr != nil {
		t.Logf("initramfs stage after a torn write: %v", m.stageErr)
	}
	got := m.addrs()
	t.Logf("before the agent: %s has %v", nodeIf, got)
	if want.before != "" && !c.torn() && !slices.Contains(got, want.before) {
		bad("before the agent the NIC has %v, not the working address %s", got, want.before)
	}
	if len(got) == 0 {
		run(t, m.inNode("ip", "addr", "add", cidr(bootstrap), "dev", nodeIf)...)
	}
	if res := m.runAgent(nil); res.code != 0 {
		bad("agent exit %d, want 0", res.code)
		return problems
	}
	if invs := m.inventories(); len(invs) != 1 || invs[0].AuthKind != want.auth {
		bad("regserver's inventories %+v, want one registered with %s", invs, want.auth)
		return problems
	}
	kf, _ := os.ReadFile(m.path(keyfileDir + "/" + want.keyfile + ".nmconnection"))
	app, _ := os.ReadFile(m.path(applicator))
	for name, addr := range want.claims {
		if got := m.claimed(name); got != addr {
			bad("claim %s holds %s, want the recorded run's %s", name, got, addr)
		}
		m.waitAddr(start, cidr(addr))
		if !strings.Contains(string(kf), cidr(addr)) || !strings.Contains(string(app), cidr(addr)) {
			bad("keyfile %s or applicator lacks %s:\n%s", want.keyfile, cidr(addr), kf)
		}
	}
	for _, g := range want.gone {
		if m.exists(keyfileDir + "/" + g + ".nmconnection") {
			bad("keyfile %s of the old config still there", g)
		}
	}
	problems = append(problems, m.oemWhole(c, want.keyfile)...)
	if v := m.runVerify(); v.code != 0 {
		bad("verify exit %d, want 0", v.code)
	}
	return problems
}

// oemWhole checks every file under /oem: the manifest owns keyfile (and
// nothing else of the keyfile directory) with nothing pending, the state
// records the registration and the applied config, every YAML and JSON
// file parses, no temp file is left, and a file is kept aside as corrupt
// only after a torn write.
func (m *machine) oemWhole(c cut, keyfile string) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	var man struct {
		Files   []struct{ Path, Kind string }
		Pending []json.RawMessage
	}
	var owned []string
	if err := json.Unmarshal(m.read(manifest), &man); err != nil {
		bad("manifest: %v", err)
	}
	for _, f := range man.Files {
		if f.Kind == "keyfile" {
			owned = append(owned, f.Path)
		}
	}
	if len(man.Pending) != 0 || !slices.Equal(owned, []string{"/" + keyfileDir + "/" + keyfile + ".nmconnection"}) {
		bad("manifest does not own %s alone, or has a change pending: %s", keyfile, m.read(manifest))
	}
	var st map[string]any
	if err := yaml.Unmarshal(m.read(stateFile), &st); err != nil || st["initialRegistration"] == nil || st["nodereg-network-digest"] == nil {
		bad("state file: %v: %s", err, m.read(stateFile))
	}
	var files []string
	err := filepath.WalkDir(m.path("oem"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(m.root, p)
		files = append(files, rel)
		if why := fileWhole(d.Name(), p, c.torn()); why != "" {
			bad("%s %s", rel, why)
		}
		return nil
	})
	if err != nil {
		bad("walking /oem: %v", err)
	}
	sort.Strings(files)
	if len(problems) > 0 {
		problems = append(problems, "files under /oem: "+strings.Join(files, " "))
	}
	return problems
}

// fileWhole says what is wrong with one file under /oem, "" when nothing.
func fileWhole(name, p string, torn bool) string {
	b, err := os.ReadFile(p)
	switch {
	case err != nil:
		return err.Error()
	case strings.HasPrefix(name, ".nodereg-") && strings.HasSuffix(name, ".tmp"):
		return "is a temp file left behind"
	case strings.Contains(name, ".corrupt-"):
		if !torn {
			return "kept aside after a cut that tore nothing"
		}
	case strings.HasSuffix(name, ".json"):
		if json.Unmarshal(b, new(any)) != nil {
			return "does not parse"
		}
	case strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"):
		if yaml.Unmarshal(b, new(any)) != nil {
			return "does not parse"
		}
	case len(b) == 0:
		return "is empty"
	}
	return ""
}
