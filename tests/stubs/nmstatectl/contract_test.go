package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/nmlab"
	"gopkg.in/yaml.v3"
)

// The contract test replays the real nmstatectl 2.2.38's transcripts
// (testdata/transcripts, README.md there) through the stand-in: exit code,
// stderr (timestamps and checkpoint numbers normalised as the transcripts
// do; random UUIDs matched one to one), stdout, and, against a real
// NetworkManager, the keyfiles and profiles after each case.

// chains are the transcripts' set-ups: each chain runs in order against
// one fresh NetworkManager (eth0 and eth1 veths, no profiles).
var chains = [][]string{
	{"01-version"}, {"02-gc-static-ethernet"}, {"03-gc-bond-vlan"}, {"04-gc-unknown-key"}, {"05-gc-unknown-iface-type"},
	{"06-apply-no-commit", "07-commit", "08-show", "09-show-eth0"},
	{"10-apply-no-commit-for-rollback", "11-rollback"},
	{"12-apply-missing-interface"},
	{"13-apply-no-commit-first", "14-apply-no-commit-second", "15-rollback-after-conflict"},
	{"16-commit-no-checkpoint"}, {"17-rollback-no-checkpoint"},
	{"18-arg-quiet"}, {"19-arg-verbose"}, {"20-arg-timeout-not-number"}, {"21-arg-unknown-subcommand"},
	{"22-apply-memory-only"},
	{"23-rename-apply-nrnode0", "24-rename-commit-nrnode0", "25-rename-apply-nrnode1", "26-rename-commit-nrnode1"},
	{"27-gc-rule-main-table-x10"},
}

// exception is a difference between a transcript and the stand-in that
// the test names instead of comparing: at most three.
type exception struct {
	cases []string
	what  string
	why   string
}

var exceptions = []exception{
	{[]string{"27-gc-rule-main-table-x10"},
		"gc exits 70 (stub: declined) where nmstatectl puts the rule's routing-rule0 on eth0 or on eth1 (stdout.1, stdout.2)",
		"nmstate picks one of the interfaces with routes in the rule's table by walking a HashSet, at random; the built-in translator, which the stand-in's gc is, refuses that input as Unsupported rather than pick, and the stand-in does not write keyfiles of its own"},
	{[]string{"08-show", "09-show-eth0"},
		"show's stdout is compared by shape: the keys in nmstate's order, the interfaces, their types, states and addresses, the routes; not the per-interface kernel details (ethtool features, mptcp, lldp, min-mtu/max-mtu, accept-all-mac-addresses) nor the MACs",
		"those come from the kernel (nmstate reads them through nispor) and differ per machine and kernel; the stand-in reports what NetworkManager reports"},
}

func exceptionFor(name string) *exception {
	for i := range exceptions {
		if slices.Contains(exceptions[i].cases, name) {
			return &exceptions[i]
		}
	}
	return nil
}

type transcript struct {
	name    string
	args    []string
	stdin   string
	rc      int
	stdout  []string // the variants seen
	stderr  string
	touches bool              // has before/ and after/
	before  map[string]string // keyfiles and nmcli-connection-show, by relative path
	after   map[string]string
}

const transcripts = "testdata/transcripts"

func load(t *testing.T, name string) *transcript {
	t.Helper()
	d := filepath.Join(transcripts, name)
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(d, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tr := &transcript{name: name, stdin: read("stdin"), stderr: read("stderr")}
	argv := strings.Split(strings.TrimSuffix(read("argv"), "\n"), "\n")
	if argv[0] != "nmstatectl" {
		t.Fatalf("%s: argv[0] %q", name, argv[0])
	}
	tr.args = argv[1:]
	rc, err := strconv.Atoi(strings.TrimSpace(read("rc")))
	if err != nil {
		t.Fatalf("%s: rc: %v", name, err)
	}
	tr.rc = rc
	if _, err := os.Stat(filepath.Join(d, "stdout")); err == nil {
		tr.stdout = []string{read("stdout")}
	} else {
		outs, _ := filepath.Glob(filepath.Join(d, "stdout.*"))
		sort.Strings(outs)
		for _, o := range outs {
			tr.stdout = append(tr.stdout, read(filepath.Base(o)))
		}
	}
	if _, err := os.Stat(filepath.Join(d, "before")); err == nil {
		tr.touches = true
		tr.before, tr.after = readTree(t, filepath.Join(d, "before")), readTree(t, filepath.Join(d, "after"))
	}
	return tr
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTranscriptsCovered: every copied case is in exactly one chain and in
// INDEX.md, and the exceptions stay within three.
func TestTranscriptsCovered(t *testing.T) {
	dirs, err := os.ReadDir(transcripts)
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(transcripts, "INDEX.md"))
	if err != nil {
		t.Fatal(err)
	}
	var inChains []string
	for _, c := range chains {
		inChains = append(inChains, c...)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		n++
		if c := len(slices.DeleteFunc(slices.Clone(inChains), func(s string) bool { return s != d.Name() })); c != 1 {
			t.Errorf("%s is in %d chains", d.Name(), c)
		}
		if !strings.Contains(string(index), "| "+d.Name()+" |") {
			t.Errorf("%s is not in INDEX.md", d.Name())
		}
	}
	if n != len(inChains) || n != 27 {
		t.Errorf("%d case directories, %d cases in chains, want 27", n, len(inChains))
	}
	if len(exceptions) > 3 {
		t.Errorf("%d exceptions, at most 3", len(exceptions))
	}
	for _, e := range exceptions {
		if e.what == "" || e.why == "" {
			t.Errorf("exception %v without its difference or reason", e.cases)
		}
	}
}

var (
	timeRE       = regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z `)
	checkpointRE = regexp.MustCompile(`Checkpoint/\d+`)
	uuidRE       = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timestampRE  = regexp.MustCompile(`(?m)^timestamp=\d+$`)
)

// normStderr normalises as the transcripts are: <TIME>, <N>.
func normStderr(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = checkpointRE.ReplaceAllString(timeRE.ReplaceAllString(l, "[<TIME> "), "Checkpoint/<N>")
	}
	return strings.Join(lines, "\n")
}

// uuids matches the transcript's UUIDs to the stand-in's one to one: a
// random one (NetworkManager's, nmstate's) to whichever the stand-in made,
// the same each time it appears; a derived one (uuid v5) to itself.
type uuids struct{ want2got, got2want map[string]string }

func newUUIDs() *uuids { return &uuids{map[string]string{}, map[string]string{}} }

// same reports whether got is want with its UUIDs matched.
func (u *uuids) same(want, got string) (bool, string) {
	wl, gl := uuidRE.FindAllStringIndex(want, -1), uuidRE.FindAllStringIndex(got, -1)
	if len(wl) != len(gl) {
		return false, fmt.Sprintf("%d UUIDs, want %d", len(gl), len(wl))
	}
	// Replace each of got's UUIDs by the transcript's it stands for.
	var b strings.Builder
	last := 0
	for i := range gl {
		w, g := want[wl[i][0]:wl[i][1]], got[gl[i][0]:gl[i][1]]
		if w[14] == '5' && g != w {
			return false, fmt.Sprintf("UUID %s, want the derived %s", g, w)
		}
		if pw, ok := u.got2want[g]; ok && pw != w {
			return false, fmt.Sprintf("UUID %s stands for %s and %s", g, pw, w)
		}
		if pg, ok := u.want2got[w]; ok && pg != g {
			return false, fmt.Sprintf("UUID %s of the transcript is %s and %s", w, pg, g)
		}
		u.want2got[w], u.got2want[g] = g, w
		b.WriteString(got[last:gl[i][0]])
		b.WriteString(w)
		last = gl[i][1]
	}
	b.WriteString(got[last:])
	return b.String() == want, ""
}

// env for a stand-in run: no inherited bus, the test's state.
func standInEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "DBUS_SYSTEM_BUS_ADDRESS=") && !strings.HasPrefix(e, "NMSTATECTL_STUB_") {
			env = append(env, e)
		}
	}
	return append(append(env, "NMSTATECTL_STUB_AS_MAIN=1"), extra...)
}

// check compares one run with its transcript.
func check(t *testing.T, tr *transcript, r result, u *uuids) {
	t.Helper()
	if ex := exceptionFor(tr.name); ex != nil && strings.HasPrefix(ex.what, "gc exits 70") {
		if r.code != 70 || !strings.Contains(r.stderr, "stub: ") {
			t.Errorf("%s: exception %q no longer holds: exit %d, stderr %s", tr.name, ex.what, r.code, r.stderr)
		}
		return
	}
	if r.code != tr.rc {
		t.Errorf("%s: exit %d, want %d\nstderr:\n%s", tr.name, r.code, tr.rc, r.stderr)
	}
	if ok, why := u.same(tr.stderr, normStderr(r.stderr)); !ok {
		t.Errorf("%s: stderr differs %s\ngot:\n%s\nwant:\n%s", tr.name, why, normStderr(r.stderr), tr.stderr)
	}
	if ex := exceptionFor(tr.name); ex != nil {
		checkShowShape(t, tr, r.stdout)
		return
	}
	if !slices.Contains(tr.stdout, r.stdout) {
		t.Errorf("%s: stdout differs\ngot:\n%s\nwant:\n%s", tr.name, r.stdout, tr.stdout[0])
	}
}

// TestContractOffline replays every transcript without a NetworkManager:
// the stand-in's offline model (NMSTATECTL_STUB_STATE) is the recorded
// NetworkManager, with the recorded set-up's interfaces eth0 and eth1. Its
// profiles after each case are the transcript's (nmcli-connection-show).
func TestContractOffline(t *testing.T) {
	for _, chain := range chains {
		t.Run(chain[0], func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "checkpoint")
			env := standInEnv("NMSTATECTL_STUB_STATE="+state, "NMSTATECTL_STUB_INTERFACES=eth0,eth1")
			u := newUUIDs()
			for _, name := range chain {
				tr := load(t, name)
				check(t, tr, callEnv(t, env, tr.stdin, tr.args...), u)
				if tr.touches {
					checkOfflineProfiles(t, tr, state, u)
				}
			}
		})
	}
}

// checkOfflineProfiles compares the offline model's profiles with the
// transcript's `nmcli connection show` after the case (NetworkManager's
// own 'lo' aside): name, UUID, type, device, file.
func checkOfflineProfiles(t *testing.T, tr *transcript, state string, u *uuids) {
	t.Helper()
	var nm offlineNMState
	if b, err := os.ReadFile(state + ".nm.json"); err == nil {
		if err := json.Unmarshal(b, &nm); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, p := range nm.Profiles {
		dir := "/etc"
		if p.Memory {
			dir = "/run"
		}
		got = append(got, fmt.Sprintf("%s:%s:802-3-ethernet:%s:%s/NetworkManager/system-connections/%s", p.ID, p.UUID, p.Iface, dir, p.File))
	}
	sort.Strings(got)
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(tr.after["nmcli-connection-show"]), "\n") {
		if !strings.HasPrefix(l, "lo:") {
			want = append(want, l)
		}
	}
	sort.Strings(want)
	if ok, why := u.same(strings.Join(want, "\n"), strings.Join(got, "\n")); !ok {
		t.Errorf("%s: profiles after %s\ngot:\n%s\nwant:\n%s", tr.name, why, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestContractLive replays the transcripts that touch NetworkManager
// against a real one (package nmlab, root; run it under
// flock /tmp/nodereg-heavy.lock): the keyfiles NetworkManager wrote and its
// profiles after each case are the transcript's after/, byte for byte but
// for the UUIDs it drew and the timestamps. Within a chain the cases run
// one after the other: a checkpoint is NetworkManager-wide; each chain has
// a NetworkManager of its own, so the chains run in parallel.
func TestContractLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and NetworkManager")
	}
	for _, chain := range chains {
		first := load(t, chain[0])
		if !first.touches && !strings.HasPrefix(first.name, "16-") && !strings.HasPrefix(first.name, "17-") {
			continue
		}
		t.Run(chain[0], func(t *testing.T) {
			// Parallel: its NetworkManager (namespace, bus, keyfile
			// directories) is its own, and most of its time is the start.
			t.Parallel()
			lab := nmlab.Start(t, "the live contract test", func(p *labkit.Pair) {
				nmlab.Veth(t, p, "eth0")
				nmlab.Veth(t, p, "eth1")
			})
			env := standInEnv(lab.BusEnv)
			u := newUUIDs()
			if first.touches {
				compareNM(t, first.name+" (set-up, before/)", first.before, lab, u)
			}
			for _, name := range chain {
				tr := load(t, name)
				check(t, tr, callEnv(t, env, tr.stdin, tr.args...), u)
				if tr.touches {
					compareNM(t, name, tr.after, lab, u)
				}
			}
		})
	}
}

// compareNM compares NetworkManager's keyfiles and profile list with a
// transcript's tree (before/ or after/).
func compareNM(t *testing.T, label string, want map[string]string, lab *nmlab.Lab, u *uuids) {
	t.Helper()
	got := map[string]string{}
	for dir, rel := range map[string]string{lab.Etc: "etc/NetworkManager/system-connections", lab.Run: "run/NetworkManager/system-connections"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.nmconnection"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			got[rel+"/"+filepath.Base(f)] = string(b)
		}
	}
	list, err := lab.Nmcli("-t", "-f", "NAME,UUID,TYPE,DEVICE,FILENAME", "connection", "show")
	if err != nil {
		t.Fatal(err)
	}
	got["nmcli-connection-show"] = strings.ReplaceAll(list, lab.Etc, "/etc/NetworkManager/system-connections") + "\n"
	var names []string
	for k := range want {
		names = append(names, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		w, g := timestampRE.ReplaceAllString(want[k], "timestamp=<T>"), timestampRE.ReplaceAllString(got[k], "timestamp=<T>")
		if k == "nmcli-connection-show" {
			w, g = sortLines(w), sortLines(g)
		}
		if ok, why := u.same(w, g); !ok {
			t.Errorf("%s: %s differs %s\ngot:\n%s\nwant:\n%s", label, k, why, g, w)
		}
	}
}

func sortLines(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(l)
	return strings.Join(l, "\n")
}

// checkShowShape is the show exception: nmstate's keys in order, the
// interfaces with their types, states and addresses, the routes.
func checkShowShape(t *testing.T, tr *transcript, got string) {
	t.Helper()
	want := tr.stdout[0]
	if g, w := topKeys(got), topKeys(want); !slices.Equal(g, w) {
		t.Errorf("%s: show's top-level keys %v, want %v", tr.name, g, w)
	}
	if g, w := showSummary(t, got), showSummary(t, want); g != w {
		t.Errorf("%s: show differs in shape\ngot:\n%s\nwant:\n%s", tr.name, g, w)
	}
}

func topKeys(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if k, _, ok := strings.Cut(l, ":"); ok && l != "" && l[0] != ' ' && l[0] != '-' {
			out = append(out, k)
		}
	}
	return out
}

// showSummary is what the show exception compares: each interface's name,
// type, state and addresses, and the routes, one line each.
func showSummary(t *testing.T, s string) string {
	t.Helper()
	var doc struct {
		Routes map[string][]map[string]any `yaml:"routes"`
		Ifaces []struct {
			Name  string `yaml:"name"`
			Type  string `yaml:"type"`
			State string `yaml:"state"`
			IPv4  struct {
				Enabled bool `yaml:"enabled"`
				Address []struct {
					IP     string `yaml:"ip"`
					Prefix int    `yaml:"prefix-length"`
				} `yaml:"address"`
			} `yaml:"ipv4"`
		} `yaml:"interfaces"`
	}
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		t.Errorf("show output is not YAML: %v\n%s", err, s)
		return ""
	}
	var out []string
	for _, i := range doc.Ifaces {
		l := fmt.Sprintf("iface %s %s %s ipv4=%v", i.Name, i.Type, i.State, i.IPv4.Enabled)
		for _, a := range i.IPv4.Address {
			l += fmt.Sprintf(" %s/%d", a.IP, a.Prefix)
		}
		out = append(out, l)
	}
	for _, k := range []string{"running", "config"} {
		for _, r := range doc.Routes[k] {
			out = append(out, fmt.Sprintf("route %s %v %v %v %v", k, r["destination"], r["next-hop-interface"], r["next-hop-address"], r["table-id"]))
		}
	}
	return strings.Join(out, "\n")
}
