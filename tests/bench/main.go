// Command bench measures the agent's boot path and the reference server
// against the budgets of docs/performance.md and prints one table: medians over repeated
// runs, PASS or OVER per budgeted line. It reports rather than tests: it
// exits 0 when a line is OVER and 1 when a measurement could not be made.
//
// Run from the repository root after `make build build-emulated`:
//
//	CGO_ENABLED=1 go run -tags emulatedtpm ./tests/bench [-bin bin] [-runs 15]
//
// Everything happens on loopback and under a temp dir; nmstatectl is the
// strict stand-in of tests/stubs, so applies are real process runs.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// The budgets (docs/performance.md, "Budgets and the table as measured").
const (
	budgetWarmRun      = 60 * time.Millisecond
	budgetColdEmulated = 150 * time.Millisecond
	budgetColdTPMCmds  = 17
	budgetWarmKeys     = 0
	budgetInventory    = 50 * time.Millisecond
	budgetAgentSize    = 12e6
	budgetRSS          = 20e6
	// budgetServerRSS is the goal for regserver under 1,000 PLAIN
	// registrations at once (docs/regserver.md, "Limits").
	budgetServerRSS = 200e6
)

type options struct {
	bin        string
	runs       int
	tpmRuns    int
	invRuns    int
	loadRepeat int
	verbose    bool
	only       string
	// stormN: the reboot storms' sizes; loadLevels the regserver load
	// bursts (concurrency, registrations); pendingRounds the registrations
	// timed per pending-claims case.
	stormN        []int
	loadLevels    [][2]int
	pendingRounds int
}

// The full run's sizes; -short cuts each figure to a few seconds, for CI.
var (
	fullStorms = "1000,5000"
	fullLoad   = [][2]int{{1, 100}, {10, 200}, {100, 300}, {1000, 1000}}
	shortLoad  = [][2]int{{1, 20}, {10, 50}, {100, 200}, {1000, 1000}}
)

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding nodereg-agent, nodereg-agent-emulated and regserver (make build build-emulated)")
	flag.IntVar(&o.runs, "runs", 15, "agent process runs per line")
	flag.IntVar(&o.tpmRuns, "tpm-runs", 5, "agent process runs per swtpm line (each cold run starts a fresh swtpm)")
	flag.IntVar(&o.invRuns, "inventory-runs", 20, "inventory collections and render+persist rounds")
	flag.IntVar(&o.loadRepeat, "load-repeat", 3, "bursts per regserver concurrency level")
	flag.StringVar(&o.only, "only", "", "comma list of groups to run: agent,tpm,inventory,size,load,pending,storm,conflict,ratio (default all)")
	flag.BoolVar(&o.verbose, "v", false, "details on stderr: TPM commands by code, agent logs of failed runs")
	storms := flag.String("storm", fullStorms, "comma list of reboot-storm sizes (machines), each run from own addresses and from one NAT address")
	short := flag.Bool("short", false, "a few seconds of each figure (CI): 3 runs a line, one burst a level, storms of 300 machines")
	flag.Parse()
	o.loadLevels, o.pendingRounds = fullLoad, pendingRounds
	if *short {
		o.runs, o.tpmRuns, o.invRuns, o.loadRepeat, o.loadLevels, o.pendingRounds = 3, 2, 5, 1, shortLoad, 50
		if !flagSet("storm") {
			*storms = "300"
		}
	}
	var err error
	if o.stormN, err = counts(*storms); err != nil || o.runs < 1 || o.tpmRuns < 1 || o.invRuns < 1 || o.loadRepeat < 1 {
		fmt.Fprintln(os.Stderr, "bench: every count must be at least 1", err)
		os.Exit(2)
	}
	start := time.Now()
	rows, err := bench(o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	printTable(os.Stdout, rows.rows)
	printHistograms(os.Stdout, rows.histograms)
	fmt.Printf("\n%s on %s, %d-run medians, %s in all\n", time.Now().UTC().Format(time.RFC3339), hostDesc(), o.runs, time.Since(start).Round(time.Second))
	for _, r := range rows.rows {
		if r.err != nil {
			os.Exit(1)
		}
	}
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// counts parses a comma list of positive numbers.
func counts(list string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func hostDesc() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	n := strings.Count(string(b), "\nprocessor") + 1
	if !strings.HasPrefix(string(b), "processor") {
		n = 0
	}
	return fmt.Sprintf("%d CPUs", n)
}

// results are the table's rows and what is printed after it.
type results struct {
	rows       []row
	histograms []string
}

// bench runs every measurement. An error here means the bench itself could
// not start (no binaries, no temp dir); a failed measurement is a row error.
func bench(o options, diag io.Writer) (*results, error) {
	bins := map[string]string{}
	// Keyed by role; the files are named as make build names them.
	for name, file := range map[string]string{"agent": "nodereg-agent", "agent-emulated": "nodereg-agent-emulated", "regserver": "regserver"} {
		p, err := filepath.Abs(filepath.Join(o.bin, file))
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s missing (run `make build build-emulated` first): %w", file, err)
		}
		bins[name] = p
	}
	work, err := os.MkdirTemp("", "nodereg-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	stub, err := buildStub(work)
	if err != nil {
		return nil, err
	}
	// Both the agent processes and the in-process runs find the stand-in
	// through the agent's own tool override. Its offline NetworkManager
	// knows the machines' one NIC, which the templates name: without a
	// list it knows this machine's own ethernet links, as the real tool
	// asks NetworkManager, and refused every first boot's apply here.
	for k, v := range map[string]string{
		"NODEREG_NMSTATECTL":         stub,
		"NMSTATECTL_STUB_STATE":      filepath.Join(work, "nmstatectl-checkpoint"),
		"NMSTATECTL_STUB_INTERFACES": node.NIC,
	} {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	env := os.Environ()

	rs, err := startRegserver(bins["regserver"], filepath.Join(work, "regserver"))
	if err != nil {
		return nil, err
	}
	defer rs.stop()

	b := &bencher{o: o, work: work, env: env, rs: rs, bins: bins, diag: diag}
	res := &results{}
	for _, g := range []struct {
		name string
		fn   func() []row
	}{
		// ratio next to the agent runs, before the storms leave the
		// machine busy behind them.
		{"agent", b.agentRuns}, {"ratio", b.ratioRows}, {"tpm", b.tpmCountRows}, {"inventory", b.inventoryRows},
		{"size", b.sizeRows}, {"load", b.loadRows}, {"pending", b.pendingRows}, {"storm", b.stormRows}, {"conflict", b.conflictStormRows},
	} {
		if o.only == "" || slices.Contains(strings.Split(o.only, ","), g.name) {
			res.rows = append(res.rows, g.fn()...)
		}
	}
	res.histograms = b.histograms
	return res, nil
}

// buildStub compiles the nmstatectl stand-in (module root is the working
// directory, as under make).
func buildStub(work string) (string, error) {
	out := filepath.Join(work, "nmstatectl")
	cmd := exec.Command("go", "build", "-o", out, "./tests/stubs/nmstatectl")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the nmstatectl stand-in (run from the repository root): %w\n%s", err, b)
	}
	return out, nil
}

type bencher struct {
	o     options
	work  string
	env   []string
	rs    *regserver
	bins  map[string]string
	diag  io.Writer
	nextM int
	// histograms are the storms' retry histograms, printed after the table.
	histograms []string
}

// machine makes a new node under the work dir.
func (b *bencher) machine(extra string) (*machine, error) {
	b.nextM++
	url := b.rs.url()
	if strings.Contains(extra, "auth: tpm") {
		url = b.rs.tpmURL()
	}
	return newMachine(filepath.Join(b.work, fmt.Sprintf("m%04d", b.nextM)), b.nextM, url, extra)
}

const (
	authMAC      = "    auth: mac\n"
	unchangedMsg = "network config unchanged since the last run"
)

func emulatedCfg(seed int) string {
	return fmt.Sprintf("    auth: tpm\n    emulate-tpm: true\n    emulated-tpm-seed: %d\n", seed)
}

// series is the wall times and peak RSS of some agent runs.
type series struct {
	wall []time.Duration
	rss  []float64
}

func (s *series) add(r procRun) {
	s.wall = append(s.wall, r.wall)
	s.rss = append(s.rss, float64(r.maxRSS))
}

func (s *series) row(name string, budget time.Duration, note string, err error) row {
	r := row{name: name, unit: unitDuration, value: float64(median(s.wall)), budget: noBudget(), note: note, err: err}
	if budget > 0 {
		r.budget = float64(budget)
	}
	return r
}

// cold runs the agent once on each of n new machines.
func (b *bencher) cold(bin string, n int, cfg func(i int) string, pre func(*machine) (func(), error)) (*series, error) {
	s := &series{}
	for i := range n {
		m, err := b.machine(cfg(i))
		if err != nil {
			return s, err
		}
		done := func() {}
		if pre != nil {
			if done, err = pre(m); err != nil {
				return s, err
			}
		}
		r, err := runAgent(bin, m, b.env)
		done()
		if err != nil {
			return s, err
		}
		if strings.Contains(string(r.stderr), unchangedMsg) {
			return s, fmt.Errorf("first boot of %s found an unchanged config: not a cold run", m.root)
		}
		s.add(r)
	}
	return s, nil
}

// warm registers one machine (untimed), then times n runs on it, each of
// which must find the network config unchanged.
func (b *bencher) warm(bin string, n int, m *machine) (*series, error) {
	if _, err := runAgent(bin, m, b.env); err != nil {
		return nil, fmt.Errorf("registering the warm machine: %w", err)
	}
	s := &series{}
	for range n {
		r, err := runAgent(bin, m, b.env)
		if err != nil {
			return s, err
		}
		if !strings.Contains(string(r.stderr), unchangedMsg) {
			return s, fmt.Errorf("warm run on %s did not find its network config unchanged:\n%s", m.root, tail(r.stderr, 1500))
		}
		s.add(r)
	}
	return s, nil
}

func (b *bencher) inventoryRows() []row {
	ds, degraded, err := measureInventory("/", b.o.invRuns)
	note := "inventory.Collect on /"
	if len(degraded) > 0 {
		note += "; left out here: " + strings.Join(degraded, ",")
	}
	rows := []row{{name: "inventory collection (live machine)", unit: unitDuration, value: float64(median(ds)), budget: float64(budgetInventory), note: note, err: err}}
	gpu := row{name: "inventory collection (q35 fixture, GPU, full pci.ids)", unit: unitDuration, budget: float64(budgetInventory), note: "GPU names looked up in the vendor section only"}
	root, err := gpuRoot(b.work)
	if err == nil {
		ds, degraded, err = measureInventory(root, b.o.invRuns)
		gpu.value = float64(median(ds))
		if len(degraded) > 0 {
			gpu.note += "; left out: " + strings.Join(degraded, ",")
		}
	}
	gpu.err = err
	if errors.Is(err, errNoPCIIDs) {
		// Like a missing swtpm: a row not measured here, not a failure.
		gpu = row{name: gpu.name, budget: noBudget(), note: "skipped: " + err.Error()}
	}
	rows = append(rows, gpu)
	for _, c := range []struct {
		name, doc string
		nmstate   apply.NmstateChoice
		note      string
	}{
		{"render + plan + persist: nmstate (nmstatectl)", benchNetwork, apply.NmstateNmstatectl, "includes one nmstatectl gc exec (stand-in)"},
		{"render + plan + persist: nmstate (built-in)", benchNetwork, apply.NmstateBuiltin, "built-in translator, no external tool"},
		{"render + plan + persist: nmconnections", benchKeyfile, "", "no external tool"},
	} {
		ds, err := measureRenderPersist(b.work, c.doc, c.nmstate, b.o.invRuns)
		rows = append(rows, row{name: c.name, unit: unitDuration, value: float64(median(ds)), budget: noBudget(), note: c.note, err: err})
	}
	stub, err := host.Lookup("nmstatectl", os.Getenv(host.EnvNmstatectl))
	for _, c := range []struct {
		name string
		gen  apply.KeyfileGenerator
		note string
	}{
		{"seed template → keyfile: built-in translator", apply.BuiltinNmstate{}, "nmstate.GenerateKeyfiles; go test -bench SeedTemplate ./nmstate"},
		{"seed template → keyfile: nmstatectl gc (stand-in)", apply.NmstatectlGC{Path: stub, Run: host.ExecRunner{}.Run}, "process round trip + YAML; the real nmstatectl does more"},
	} {
		r := row{name: c.name, unit: unitDuration, budget: noBudget(), note: c.note, err: err}
		if err == nil {
			var ds []time.Duration
			ds, r.err = measureSeedKeyfiles(c.gen, b.o.invRuns)
			r.value = float64(median(ds))
		}
		rows = append(rows, r)
	}
	return rows
}

func (b *bencher) sizeRows() []row {
	var rows []row
	for _, c := range []struct {
		name, bin string
		budget    float64
	}{
		{"bin/nodereg-agent size (default build, stripped)", "agent", budgetAgentSize},
		{"bin/nodereg-agent-emulated size (stripped)", "agent-emulated", noBudget()},
	} {
		r := row{name: c.name, unit: unitBytes, budget: c.budget}
		fi, err := os.Stat(b.bins[c.bin])
		if err == nil {
			r.value = float64(fi.Size())
			r.err = checkStripped(b.bins[c.bin])
		} else {
			r.err = err
		}
		rows = append(rows, r)
	}
	return rows
}

// checkStripped refuses to report the size of a binary with a symbol table:
// the budget is for -ldflags '-s -w' builds.
func checkStripped(path string) error {
	out, err := exec.Command("go", "tool", "nm", path).CombinedOutput()
	if err == nil && len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("%s has a symbol table: build it with -ldflags '-s -w' (make build)", path)
	}
	return nil
}
