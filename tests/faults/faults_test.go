// Package faults runs the agent against a server that breaks the
// registration conversation at every step, in every way a network or a
// broken server can, and checks the machine is never left half-configured.
package faults

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// A state file from an earlier, unfinished run: it must come out of a
// failed run byte for byte.
const oldState = "emulatedTPMSeed: 5\nnodereg-last-phase: register\n"

// expectedStep is what the agent's error must name for a fault at step.
// A fault right after MsgGet reaches the client while it reads the config.
var expectedStep = map[string]string{
	stepUpgrade: "dial", stepAuth: "auth", stepVersion: "version", stepSmbios: "smbios",
	stepSystemData: "system-data", stepAnnotations: "annotations", stepLabels: "labels",
	stepGet: "config", stepConfig: "config", stepNetwork: "network-config",
}

type faultCase struct {
	step  string
	fault fault
	once  bool
	// previous: the machine registered and applied a config in an earlier
	// run; the faulted run must leave all of it byte for byte.
	previous bool
}

func (c faultCase) name() string {
	mode := "always"
	if c.once {
		mode = "once"
	}
	if c.previous {
		mode += "-after-good-run"
	}
	return c.step + "/" + string(c.fault) + "/" + mode
}

// terminal: a config no retry can fix (an unknown configurator) ends the
// run at once with EX_CONFIG, even if the next answer would be fine.
func (c faultCase) terminal() bool { return c.step == stepConfig && c.fault == faultUnknown }

type outcome struct {
	faultCase
	err     error
	res     *agent.Result
	hits    int
	before  map[string][]byte
	after   map[string][]byte
	elapsed time.Duration
}

// bounds are a run's --deadline (and --network-timeout) and its session
// deadline. They bound a hang, never measure speed: a run that should
// succeed has room on a loaded machine under -race. Only a stall needs a
// short session deadline, which is what cuts it; and with the backoff on
// a fake clock, the retry deadline counts the waits, not real time, so the
// attempts of a case that must fail do not depend on the machine either.
type bounds struct{ deadline, session time.Duration }

var (
	// goodRun is the registration before the fault: nothing stalls, so
	// the bounds are only there for a hang.
	goodRun = bounds{2 * time.Minute, 30 * time.Second}
	// Nothing stalls either: every attempt ends by its fault at once, and
	// the fake clock's waits 1, 2, 4, 8, 5 s make six attempts.
	quickFault = bounds{20 * time.Second, 30 * time.Second}
	// A stall is cut by the session deadline; waits 1, 2, 3 s make four
	// attempts, each at most 1.5 s of real time, within the 6 s.
	stallFault = bounds{6 * time.Second, 1500 * time.Millisecond}
)

func (c faultCase) bounds() bounds {
	if c.fault == faultStall {
		return stallFault
	}
	return quickFault
}

// faultRun is one case's server and machine, set up on the test's
// goroutine (where a failed setup may end the test).
type faultRun struct {
	faultCase
	fs *faultServer
	hs *httptest.Server
	m  *node.Machine
}

func prepare(t *testing.T, c faultCase) *faultRun {
	fs := newFaultServer(c.step, c.fault, c.once)
	hs := httptest.NewServer(fs)
	m := node.New(t, "52:54:00:00:00:01", hs.URL+"/elemental/registration/faults", "    labels: {rack: r1}\n")
	m.WriteState(t, oldState)
	return &faultRun{faultCase: c, fs: fs, hs: hs, m: m}
}

// run runs the case on a worker goroutine: failures are reported with
// t.Errorf, never t.Fatal, which must not be called off the test's
// goroutine.
func (fr *faultRun) run(t *testing.T) outcome {
	defer fr.fs.close()
	defer fr.hs.Close()
	run := func(b bounds) (*agent.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var log node.Log
		return agent.Run(ctx, agent.Options{
			Root:            fr.m.Root,
			Deadline:        b.deadline,
			NetworkTimeout:  b.deadline,
			SessionDeadline: b.session,
			// The backoff between attempts runs on a fake clock: the
			// deadlines above bound attempts, not real sleeps. A stalled
			// step still costs its real session deadline.
			Clock:   retrytest.NewClock(time.Now()),
			Version: "faults",
			Out:     &log,
			Log:     log.Entry(),
			Runner:  fr.m.Runner(),
		})
	}
	if fr.previous {
		fr.fs.arm(false)
		if _, err := run(goodRun); err != nil {
			t.Errorf("%s: the good run before the fault failed: %v", fr.name(), err)
		}
		fr.fs.arm(true)
	}
	o := outcome{faultCase: fr.faultCase}
	var err error
	if o.before, err = testutil.ReadFiles(fr.m.Root); err != nil {
		t.Errorf("%s: %v", fr.name(), err)
	}
	start := time.Now()
	o.res, o.err = run(fr.bounds())
	o.elapsed = time.Since(start)
	o.hits = fr.fs.Hits()
	if o.after, err = testutil.ReadFiles(fr.m.Root); err != nil {
		t.Errorf("%s: %v", fr.name(), err)
	}
	return o
}

// TestFaultInjection: 10 steps x 5 faults x (once on a new machine, always
// on a new machine, always after a good run) = 150 cases.
func TestFaultInjection(t *testing.T) {
	// Set once for the whole process before any run starts: the agent
	// looks its tools up in the environment.
	useStub(t)
	// Parallel once the variable is set (so the tests after this one see
	// it as they did): its stalls wait out seconds of session deadlines,
	// which TestDamagedStoreExits78OrServes's CPU work can fill.
	t.Parallel()
	var cases []faultCase
	for _, s := range allSteps {
		for _, f := range allFaults {
			cases = append(cases, faultCase{s, f, true, false}, faultCase{s, f, false, false}, faultCase{s, f, false, true})
		}
	}
	if testing.Short() {
		cases = cases[:20]
	}
	results := make([]outcome, len(cases))
	// The runs mostly wait on deadlines: many at once keep the suite short
	// on two cores. A stall case spends seconds waiting out its session
	// deadlines and next to no CPU, so the stalls all run at once, started
	// first, beside at most 12 of the others, which are quick but busy.
	// Each machine's stand-in models a NetworkManager of its own (its
	// StubDir); against one real NetworkManager (the stand-in's live mode,
	// a bus named) a checkpoint is NetworkManager-wide, so the runs, which
	// take checkpoints, go one at a time.
	var stalls, others []int
	for i, c := range cases {
		if c.fault == faultStall {
			stalls = append(stalls, i)
		} else {
			others = append(others, i)
		}
	}
	busy, waiting := make(chan struct{}, 12), make(chan struct{}, max(1, len(stalls)))
	if os.Getenv("DBUS_SYSTEM_BUS_ADDRESS") != "" {
		busy = make(chan struct{}, 1)
		waiting = busy
	}
	var wg sync.WaitGroup
	for _, i := range append(stalls, others...) {
		sem := busy
		if cases[i].fault == faultStall {
			sem = waiting
		}
		fr := prepare(t, cases[i])
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = fr.run(t)
		}()
	}
	wg.Wait()

	tally := map[string]int{}
	var table strings.Builder
	fmt.Fprintf(&table, "%-50s %-9s %-5s %4s %8s  %s\n", "case", "outcome", "exit", "hits", "elapsed", "error")
	for _, o := range results {
		outcomeName := "completed"
		if o.err != nil {
			outcomeName = "failed"
		}
		tally[outcomeName]++
		msg := ""
		if o.err != nil {
			msg = o.err.Error()
			if len(msg) > 160 {
				msg = msg[:160] + "…"
			}
		}
		fmt.Fprintf(&table, "%-50s %-9s %-5d %4d %8s  %s\n", o.name(), outcomeName, exitcode.Of(o.err), o.hits, o.elapsed.Round(10*time.Millisecond), msg)
		t.Run(o.name(), func(t *testing.T) { check(t, o) })
	}
	t.Logf("fault cases:\n%s", table.String())
	var keys []string
	for k := range tally {
		keys = append(keys, fmt.Sprintf("%s=%d", k, tally[k]))
	}
	sort.Strings(keys)
	t.Logf("SUMMARY: %d fault cases: %s", len(results), strings.Join(keys, " "))
}

func check(t *testing.T, o outcome) {
	if o.hits == 0 {
		t.Fatalf("the fault at %s never fired: the case tests nothing", o.step)
	}
	if l := node.Leftovers(o.after); len(l) > 0 {
		t.Errorf("half-written files left behind: %v", l)
	}
	statePath := filepath.FromSlash(node.StatePath)
	switch {
	case o.once && !o.terminal():
		if o.err != nil {
			t.Fatalf("a transient fault was not retried to success: %v", o.err)
		}
		if got := o.res.Addresses["inventory-ip"]; got != "192.168.122.150" {
			t.Errorf("result addresses %v, want inventory-ip 192.168.122.150", o.res.Addresses)
		}
		checkNewState(t, o.after[statePath])
		checkApplicator(t, o)
	default:
		if o.err == nil {
			t.Fatalf("run succeeded although the server broke every attempt at %s", o.step)
		}
		want := expectedStep[o.step]
		if !strings.Contains(o.err.Error(), want+":") {
			t.Errorf("error does not name the step %q: %v", want, o.err)
		}
		wantExit := exitcode.TempFail
		if o.terminal() {
			wantExit = exitcode.Config
		}
		if got := exitcode.Of(o.err); got != wantExit {
			t.Errorf("exit code %d, want %d (%v)", got, wantExit, o.err)
		}
		for _, p := range node.Changed(o.before, o.after) {
			if p != statePath {
				t.Errorf("failed run changed %s", p)
			}
		}
		if b, ok := o.after[statePath]; ok && !bytes.Equal(b, o.before[statePath]) {
			// Allowed only as a complete new version.
			checkNewState(t, b)
		}
	}
}

// checkNewState: the state file is a complete, valid new version.
func checkNewState(t *testing.T, b []byte) {
	t.Helper()
	if b == nil {
		t.Fatal("no state file after the run")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "state.yaml")
	node.Must(t, os.WriteFile(p, b, 0o600))
	st, note, err := state.Load(host.Root("/"), p)
	if err != nil || strings.Contains(note, "corrupt") {
		t.Fatalf("state file is not a valid version: %v %s\n%s", err, note, b)
	}
	if !st.Registered() {
		t.Errorf("state after a successful run does not record the registration:\n%s", b)
	}
}

// checkApplicator: what the run wrote besides the state is complete: every
// changed file is non-empty and every YAML file parses.
func checkApplicator(t *testing.T, o outcome) {
	t.Helper()
	var wrote []string
	for _, p := range node.Changed(o.before, o.after) {
		b, ok := o.after[p]
		if !ok {
			t.Errorf("run removed %s", p)
			continue
		}
		wrote = append(wrote, p)
		if len(b) == 0 {
			t.Errorf("%s is empty", p)
		}
		if strings.HasSuffix(p, ".yaml") {
			var v any
			if err := yamlUnmarshal(b, &v); err != nil {
				t.Errorf("%s is not YAML: %v", p, err)
			}
		}
	}
	if len(wrote) < 2 {
		t.Errorf("a successful run wrote only %v: no applicator", wrote)
	}
}
