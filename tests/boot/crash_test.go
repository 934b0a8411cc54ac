//go:build bootsim

package boot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
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

// durableOp is one line of the crashrec build's record (internal/host,
// durable_crashrec.go): a write, remove, mkdir or aside through host.Root,
// in the order it reached the disk.
type durableOp struct {
	Op   string      `json:"op"`
	Path string      `json:"path"`
	Data []byte      `json:"data"`
	To   string      `json:"to"`
	Mode fs.FileMode `json:"mode"`
}

func (o durableOp) String() string { return o.Op + " " + o.Path }

// cut is one power cut: the first k operations reached the disk, and the
// (k+1)th left what variant says.
type cut struct {
	k       int
	variant string
}

// The ways operation k+1, a write, can be caught by the cut: its temp file
// whole but not renamed (atomicfile.Write's fsync done, rename not), or,
// where a rename is not atomic, the target torn: empty, or half written.
const (
	cutClean    = "clean"
	cutTemp     = "temp file left"
	cutTornNone = "target torn (empty)"
	cutTornHalf = "target torn (half)"
)

// cutPoints are every prefix of ops, and for each write the states a cut
// during it can leave.
func cutPoints(ops []durableOp) []cut {
	var out []cut
	for k := 0; k <= len(ops); k++ {
		out = append(out, cut{k, cutClean})
		if k < len(ops) && ops[k].Op == "write" {
			out = append(out, cut{k, cutTemp}, cut{k, cutTornNone}, cut{k, cutTornHalf})
		}
	}
	return out
}

func (c cut) torn() bool { return strings.HasPrefix(c.variant, "target torn") }

func (c cut) describe(ops []durableOp) string {
	s := fmt.Sprintf("after %d of %d operations", c.k, len(ops))
	if c.k > 0 {
		s += " (last: " + ops[c.k-1].String() + ")"
	}
	if c.variant != cutClean {
		s += ", during " + ops[c.k].String() + ": " + c.variant
	}
	return s
}

func readOps(t *testing.T, file string) []durableOp {
	t.Helper()
	f, err := os.Open(file)
	must(t, err)
	defer f.Close()
	var ops []durableOp
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var op durableOp
		must(t, json.Unmarshal(sc.Bytes(), &op))
		ops = append(ops, op)
	}
	must(t, sc.Err())
	return ops
}

// entry is a file or directory of a saved tree.
type entry struct {
	dir  bool
	mode fs.FileMode
	data []byte
}

// saveTree is the node's disk (its /oem and /etc) as the run found it.
func saveTree(t *testing.T, m *machine) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for _, top := range []string{"oem", "etc"} {
		err := filepath.WalkDir(m.path(top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.root, p)
			e := entry{dir: d.IsDir(), mode: info.Mode().Perm()}
			if d.Type().IsRegular() {
				if e.data, err = os.ReadFile(p); err != nil {
					return err
				}
			}
			out[rel] = e
			return nil
		})
		must(t, err)
	}
	return out
}

// replay puts the node's disk in the state cut c leaves: the saved tree,
// then the first c.k operations, then what the cut left of the next one.
func replay(t *testing.T, m *machine, initial map[string]entry, ops []durableOp, c cut) {
	t.Helper()
	for _, top := range []string{"oem", "etc"} {
		must(t, os.RemoveAll(m.path(top)))
	}
	for _, rel := range slices.Sorted(maps.Keys(initial)) {
		e := initial[rel]
		if e.dir {
			must(t, os.MkdirAll(m.path(rel), e.mode))
			continue
		}
		must(t, os.WriteFile(m.path(rel), e.data, e.mode))
	}
	// The kernel drops the run's flock with the power; its file stays.
	must(t, os.WriteFile(m.path("oem/registration/.nodereg.lock"), []byte("4194303\n"), 0o600))
	for _, op := range ops[:c.k] {
		p := m.path(op.Path)
		switch op.Op {
		case "write":
			must(t, os.WriteFile(p+".replay", op.Data, op.Mode))
			must(t, os.Rename(p+".replay", p))
		case "remove":
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		case "mkdir":
			must(t, os.MkdirAll(p, op.Mode))
		case "aside":
			must(t, os.Rename(p, filepath.Join(filepath.Dir(p), filepath.Base(op.To))))
		default:
			t.Fatalf("unknown recorded operation %q", op.Op)
		}
	}
	if c.variant == cutClean {
		return
	}
	op := ops[c.k]
	p := m.path(op.Path)
	switch c.variant {
	case cutTemp:
		must(t, os.WriteFile(filepath.Join(filepath.Dir(p), ".nodereg-4242.tmp"), op.Data, op.Mode))
	case cutTornNone:
		must(t, os.WriteFile(p, nil, op.Mode))
	case cutTornHalf:
		must(t, os.WriteFile(p, op.Data[:len(op.Data)/2], op.Mode))
	}
}

// seen is what the next boot starts from: /oem, and /etc when it is kept.
func (m *machine) seen(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	tops := []string{"oem"}
	if m.keepEtc {
		tops = append(tops, "etc")
	}
	for _, top := range tops {
		err := filepath.WalkDir(m.path(top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(m.root, p)
			fmt.Fprintf(h, "%s %v\n", rel, d.IsDir())
			if d.Type().IsRegular() {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "%x\n", sha256.Sum256(b))
			}
			return nil
		})
		must(t, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

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

// A power cut at any moment of a first boot's apply: the first boot runs
// the crashrec build of the agent, which records every durable operation;
// then, for every prefix of that sequence (and, for each write, its temp
// file left, or its target torn where a rename is not atomic), the node's
// disk is put in that state, the node boots (its /etc wiped or kept) and
// the agent's own build runs once. Every cut must converge without a
// person (convergence below). docs/apply.md, "Crash consistency".
func TestCrashFirstApply(t *testing.T) {
	for _, mode := range crashModes {
		t.Run(strings.NewReplacer(" ", "-", ",", "").Replace(mode.name), func(t *testing.T) {
			t.Parallel()
			crashFirstApply(t, mode)
		})
	}
}

func crashFirstApply(t *testing.T, mode crashMode) {
	modeName := mode.name
	r := newReport(t, "crash: first apply cut, "+modeName)
	cfg := serverConfig(keyfileTemplate)
	if mode.tpm {
		cfg = strings.Replace(cfg, "auth: mac", "auth: tpm", 1)
	}
	m := newMachine(t, cfg)
	if mode.tpm {
		m.writeConfig("auth: tpm", "tpm-device: "+tpmtest.StartSwtpm(t, false).Device())
	}
	m.keepEtc = mode.keep
	prod := m.agent
	m.agent = testbin.Build(t, "./cmd/agent", "crashrec")
	start := m.boot(active, true)
	initial := saveTree(t, m)
	log := filepath.Join(m.dir, "durable.jsonl")
	if res := m.runAgent([]string{"NODEREG_CRASHREC_LOG=" + log}); res.code != 0 {
		t.Fatalf("recorded first boot: agent exit %d, want 0", res.code)
	}
	addr := m.claimed("inventory-ip")
	authKind := m.inventories()[0].AuthKind
	if mode.tpm && authKind != "tpm" {
		t.Fatalf("recorded first boot registered with %q, want tpm", authKind)
	}
	r.boot("first", m.waitAddr(start, cidr(addr)))
	ops := readOps(t, log)
	for i, op := range ops {
		t.Logf("durable operation %d: %s (%d bytes)", i+1, op, len(op.Data))
	}
	m.agent = prod
	cuts := mode.cutsFor(ops)
	states := map[string]string{}
	var failed []string
	for _, c := range cuts {
		replay(t, m, initial, ops, c)
		what := c.describe(ops)
		if prev, ok := states[m.seen(t)]; ok {
			fmt.Printf("crash: %s: %s: the same disk as %s, not booted again\n", modeName, what, prev)
			continue
		}
		states[m.seen(t)] = what
		m.tolerateStage = c.torn()
		problems := m.converges(t, c, addr, authKind)
		outcome := "converged"
		if len(problems) > 0 {
			outcome = "FAILED: " + strings.Join(problems, "; ")
			failed = append(failed, what)
			t.Errorf("%s: %s", what, strings.Join(problems, "; "))
		}
		fmt.Printf("crash: %s: %s: next boot %s\n", modeName, what, outcome)
	}
	fmt.Printf("crash: %s: %d operations, %d cut points, %d distinct disks booted, %d failed\n",
		modeName, len(ops), len(cuts), len(states), len(failed))
}

// converges boots the node after cut c and runs the agent once; it returns
// what does not hold of: exit 0, the one inventory with the same claim,
// the address on the NIC, keyfile and applicator with it, manifest and
// state parseable and final, every file under /oem whole (a torn one kept
// aside only after a torn cut), no temp file, verify exit 0.
func (m *machine) converges(t *testing.T, c cut, addr, wantAuth string) []string {
	t.Helper()
	// The network answers DHCP where NetworkManager brings up no profile
	// of ours: the bootstrap address stands for it. Put there before
	// NetworkManager starts it would make the NIC "external", and our
	// profile would not come up (the first boot only has that).
	start := m.boot(active, false)
	if len(m.addrs()) == 0 {
		run(t, m.inNode("ip", "addr", "add", cidr(bootstrap), "dev", nodeIf)...)
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if m.stageErr != nil {
		t.Logf("initramfs stage after a torn write: %v", m.stageErr)
	}
	t.Logf("before the agent: %s has %v", nodeIf, m.addrs())
	res := m.runAgent(nil)
	if res.code != 0 {
		bad("agent exit %d, want 0", res.code)
		return problems
	}
	if invs := m.inventories(); len(invs) != 1 {
		bad("regserver has %d inventories, want 1", len(invs))
	} else if invs[0].AuthKind != wantAuth {
		bad("regserver's inventory registered with %q, want %q", invs[0].AuthKind, wantAuth)
	} else if got := m.claimed("inventory-ip"); got != addr {
		bad("claim holds %s, want the first boot's %s", got, addr)
	}
	m.waitAddr(start, cidr(addr))
	kf, err := os.ReadFile(m.path(keyfileDir + "/" + nodeIf + ".nmconnection"))
	if err != nil || !strings.Contains(string(kf), "address1="+cidr(addr)+",") {
		bad("keyfile: %v\n%s", err, kf)
	}
	if b, err := os.ReadFile(m.path(applicator)); err != nil || !strings.Contains(string(b), "address1="+cidr(addr)+",") {
		bad("applicator: %v", err)
	}
	problems = append(problems, m.oemWhole(c)...)
	if v := m.runVerify(); v.code != 0 {
		bad("verify exit %d, want 0", v.code)
	}
	return problems
}

// oemWhole checks every file under /oem: the manifest owns the keyfile
// with nothing pending, the state records the registration and the applied
// config, every YAML and JSON file parses, no temp file is left, and a
// file kept aside as corrupt only after a torn write.
func (m *machine) oemWhole(c cut) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	var man struct {
		Files   []struct{ Path string }
		Pending []json.RawMessage
	}
	if err := json.Unmarshal(m.read(manifest), &man); err != nil {
		bad("manifest: %v", err)
	} else if len(man.Pending) != 0 || !slices.ContainsFunc(man.Files, func(f struct{ Path string }) bool {
		return f.Path == "/"+keyfileDir+"/"+nodeIf+".nmconnection"
	}) {
		bad("manifest does not own the keyfile alone: %s", m.read(manifest))
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
		name := d.Name()
		b, err := os.ReadFile(p)
		switch {
		case err != nil:
			bad("%s: %v", rel, err)
		case strings.HasPrefix(name, ".nodereg-") && strings.HasSuffix(name, ".tmp"):
			bad("temp file %s left", rel)
		case strings.Contains(name, ".corrupt-"):
			if !c.torn() {
				bad("%s kept aside after a cut that tore nothing", rel)
			}
		case strings.HasSuffix(name, ".json"):
			if json.Unmarshal(b, new(any)) != nil {
				bad("%s does not parse", rel)
			}
		case strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"):
			if yaml.Unmarshal(b, new(any)) != nil {
				bad("%s does not parse", rel)
			}
		case len(b) == 0:
			bad("%s is empty", rel)
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
