package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent/exitcode"
)

// units lists every unit file shipped in this directory.
var units = []string{"nodereg.service", "nodereg-update.service", "nodereg-update.timer", "nodereg-reset.service", "nodereg-install.service", "nodereg-verify.service"}

const agentPath = "/usr/sbin/nodereg-agent"

// unitFile maps "Section.Key" to its values in order, as systemd reads
// repeated keys. Enough for our own files: no line continuations.
type unitFile map[string][]string

func parseUnit(t *testing.T, name string) unitFile {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not a key=value line: %q", name, line)
			}
			key := section + "." + strings.TrimSpace(k)
			u[key] = append(u[key], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// one returns the single value of key, failing when it is absent or repeated.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	v := u[key]
	if len(v) != 1 {
		t.Errorf("%s: got %q, want exactly one value", key, v)
		return ""
	}
	return v[0]
}

// words splits every value of key on whitespace (After=a b, After=c).
func (u unitFile) words(key string) []string {
	var out []string
	for _, v := range u[key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func needAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found: install the Debian package \"systemd\" to verify the units")
	}
	return p
}

// fakeAgent writes an executable for ExecStart=, which verify requires to
// exist.
func fakeAgent(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "nodereg-agent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// verify runs systemd-analyze verify on path and returns everything it
// printed. Warnings come with exit status 0, so the output is the verdict.
func verify(t *testing.T, analyze, path string) string {
	t.Helper()
	cmd := exec.Command(analyze, "verify", "--man=no", path)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Fatalf("systemd-analyze verify %s: %v", path, err)
	}
	return string(out)
}

// copyUnits copies the shipped units into dir with ExecStart= pointing at
// agent, the way install.mk rewrites them for another NODEREG_AGENT.
func copyUnits(t *testing.T, dir, agent string) {
	t.Helper()
	for _, name := range units {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), agentPath) && strings.HasSuffix(name, ".service") {
			t.Fatalf("%s does not run %s", name, agentPath)
		}
		out := strings.ReplaceAll(string(b), agentPath, agent)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUnitsVerifyClean(t *testing.T) {
	analyze := needAnalyze(t)
	dir := t.TempDir()
	copyUnits(t, dir, fakeAgent(t, dir))
	for _, name := range units {
		t.Run(name, func(t *testing.T) {
			if out := verify(t, analyze, filepath.Join(dir, name)); out != "" {
				t.Errorf("systemd-analyze verify %s printed:\n%s", name, out)
			}
		})
	}
}

// TestVerifyCatchesWarnings guards the check above: a unit with a typo must
// make systemd-analyze print something, or an empty output proves nothing.
func TestVerifyCatchesWarnings(t *testing.T) {
	analyze := needAnalyze(t)
	dir := t.TempDir()
	copyUnits(t, dir, fakeAgent(t, dir))
	p := filepath.Join(dir, "nodereg.service")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "Type=notify", "Type=notifyy", 1)
	if broken == string(b) {
		t.Fatal("nodereg.service has no Type=notify line to break")
	}
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verify(t, analyze, p); !strings.Contains(out, "notifyy") {
		t.Errorf("verify of a unit with Type=notifyy printed %q, want a warning naming it", out)
	}
}

func TestBootService(t *testing.T) {
	u := parseUnit(t, "nodereg.service")
	if got := u.one(t, "Service.Type"); got != "notify" {
		t.Errorf("Type=%s, want notify", got)
	}
	if got := u.one(t, "Service.Restart"); got != "on-failure" {
		t.Errorf("Restart=%s, want on-failure", got)
	}
	u.one(t, "Service.RestartSec")
	if got := u.one(t, "Service.TimeoutStartSec"); got == "infinity" || got == "0" {
		t.Errorf("TimeoutStartSec=%s: must be finite for EXTEND_TIMEOUT_USEC to matter", got)
	}
	if !slices.Contains(u.words("Unit.After"), "NetworkManager.service") {
		t.Errorf("After= %v lacks NetworkManager.service", u.words("Unit.After"))
	}
	notOnline(t, u)
	if !slices.Contains(u["Service.EnvironmentFile"], "-/etc/sysconfig/proxy") {
		t.Errorf("EnvironmentFile= %v lacks the optional proxy file", u["Service.EnvironmentFile"])
	}
	if !slices.Contains(u["Unit.ConditionPathExists"], "!/run/elemental/recovery_mode") {
		t.Error("the boot run must not run in recovery, where nodereg-reset.service acts")
	}
	if got := u.one(t, "Install.WantedBy"); got != "multi-user.target" {
		t.Errorf("WantedBy=%s, want multi-user.target", got)
	}
}

func TestUpdateTimerAndService(t *testing.T) {
	timer := parseUnit(t, "nodereg-update.timer")
	if got := timer.one(t, "Timer.OnUnitInactiveSec"); got != "30min" {
		t.Errorf("OnUnitInactiveSec=%s, want 30min like upstream", got)
	}
	if got := timer.one(t, "Install.WantedBy"); got != "timers.target" {
		t.Errorf("WantedBy=%s, want timers.target", got)
	}
	timer.one(t, "Timer.RandomizedDelaySec")
	if u := timer["Timer.Unit"]; len(u) != 0 && u[0] != "nodereg-update.service" {
		t.Errorf("timer starts %v, want nodereg-update.service", u)
	}

	svc := parseUnit(t, "nodereg-update.service")
	if !slices.Contains(svc.words("Unit.After"), "nodereg.service") {
		t.Error("an update must not overlap the boot run")
	}
	notOnline(t, svc)
	if got := svc.one(t, "Service.ExecStart"); strings.Contains(got, "--reset") || strings.Contains(got, "--install") {
		t.Errorf("update ExecStart=%s must be a plain registration", got)
	}
	if exec := strings.Fields(svc.one(t, "Service.ExecStart")); !slices.Contains(exec, "--repair-drift") {
		t.Errorf("update ExecStart=%v: the timer's run repairs drift (docs/verify.md)", exec)
	}
	if got := svc.one(t, "Service.NotifyAccess"); got != "main" {
		t.Errorf("NotifyAccess=%s, want main so STATUS reaches systemctl", got)
	}
	if _, ok := svc["Install.WantedBy"]; ok {
		t.Error("the update service is started by its timer, not enabled on its own")
	}
}

func TestResetService(t *testing.T) {
	u := parseUnit(t, "nodereg-reset.service")
	if got := u.one(t, "Unit.ConditionPathExists"); got != "/run/elemental/recovery_mode" {
		t.Errorf("ConditionPathExists=%s, want /run/elemental/recovery_mode", got)
	}
	exec := strings.Fields(u.one(t, "Service.ExecStart"))
	if len(exec) == 0 || exec[0] != agentPath || !slices.Contains(exec, "--reset") {
		t.Errorf("ExecStart=%v, want %s ... --reset", exec, agentPath)
	}
	if len(u["Install.WantedBy"]) != 0 || len(u["Install.RequiredBy"]) != 0 {
		t.Error("the reset must only run when started, never from a plain recovery boot")
	}
}

func TestEveryServiceRunsTheAgent(t *testing.T) {
	for _, name := range units {
		if !strings.HasSuffix(name, ".service") {
			continue
		}
		u := parseUnit(t, name)
		exec := strings.Fields(u.one(t, "Service.ExecStart"))
		if len(exec) == 0 || exec[0] != agentPath {
			t.Errorf("%s: ExecStart=%v, want %s", name, exec, agentPath)
		}
	}
	// Catch a unit added to the directory but not to the list (and so
	// neither verified nor installed).
	var found []string
	for _, pat := range []string{"*.service", "*.timer", "*.socket", "*.path", "*.target"} {
		m, _ := filepath.Glob(pat)
		found = append(found, m...)
	}
	slices.Sort(found)
	want := slices.Clone(units)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("unit files in systemd/ = %v, the tests and install.mk know %v", found, want)
	}
}

func TestInstallServiceRunsOnlyFromLiveMedia(t *testing.T) {
	u := parseUnit(t, "nodereg-install.service")
	exec := strings.Fields(u.one(t, "Service.ExecStart"))
	if len(exec) == 0 || exec[0] != agentPath || !slices.Contains(exec, "--install") {
		t.Errorf("ExecStart=%v, want %s ... --install", exec, agentPath)
	}
}

// conditionsHold evaluates the ConditionPathExists= lines of u against the
// set of existing paths; systemd requires all of them (none use the "|"
// trigger form).
func conditionsHold(u unitFile, exists map[string]bool) bool {
	for _, c := range u["Unit.ConditionPathExists"] {
		if neg, ok := strings.CutPrefix(c, "!"); ok {
			if exists[neg] {
				return false
			}
		} else if !exists[c] {
			return false
		}
	}
	return true
}

// TestModesPickTheRightUnits checks, mode by mode (the sentinels written by
// elemental's dracut hook, docs/boot-simulation.md), which units may act.
func TestModesPickTheRightUnits(t *testing.T) {
	modes := map[string][]string{
		"active":   {"/run/elemental/active_mode"},
		"passive":  {"/run/elemental/passive_mode"},
		"recovery": {"/run/elemental/recovery_mode"},
		"live":     {"/run/elemental/live_mode"},
	}
	want := map[string][]string{
		"active":   {"nodereg-update.service", "nodereg-update.timer", "nodereg-verify.service", "nodereg.service"},
		"passive":  {"nodereg-update.service", "nodereg-update.timer", "nodereg-verify.service", "nodereg.service"},
		"recovery": {"nodereg-reset.service"},
		"live":     {"nodereg-install.service"},
	}
	parsed := map[string]unitFile{}
	for _, name := range units {
		parsed[name] = parseUnit(t, name)
	}
	for mode, sentinels := range modes {
		exists := map[string]bool{}
		for _, s := range sentinels {
			exists[s] = true
		}
		var runs []string
		for _, name := range units {
			if conditionsHold(parsed[name], exists) {
				runs = append(runs, name)
			}
		}
		slices.Sort(runs)
		if !slices.Equal(runs, want[mode]) {
			t.Errorf("%s mode: units whose conditions hold = %v, want %v", mode, runs, want[mode])
		}
	}
}

// The units act on the agent's one exit-code table: what a restart cannot
// fix is never restarted, a stop is not a failure.
func TestExitStatusesMatchTheAgentsTable(t *testing.T) {
	statuses := func(codes []int) string {
		s := make([]string, len(codes))
		for i, c := range codes {
			s[i] = strconv.Itoa(c)
		}
		return strings.Join(s, " ")
	}
	for _, name := range units {
		if !strings.HasSuffix(name, ".service") {
			continue
		}
		u := parseUnit(t, name)
		if got, want := u.one(t, "Service.SuccessExitStatus"), statuses(exitcode.Stopped); got != want {
			t.Errorf("%s: SuccessExitStatus=%s, want %s", name, got, want)
		}
		if len(u["Service.Restart"]) == 0 {
			continue
		}
		if got, want := u.one(t, "Service.RestartPreventExitStatus"), statuses(exitcode.NoRestart); got != want {
			t.Errorf("%s: RestartPreventExitStatus=%s, want %s", name, got, want)
		}
	}
}

// The verify unit is the boot assessment's check: after the boot run, read
// only, and still active afterwards when it passed (docs/verify.md).
func TestVerifyService(t *testing.T) {
	u := parseUnit(t, "nodereg-verify.service")
	exec := strings.Fields(u.one(t, "Service.ExecStart"))
	if len(exec) < 2 || exec[0] != agentPath || exec[1] != "verify" {
		t.Errorf("ExecStart=%v, want %s verify …", exec, agentPath)
	}
	if got := u.one(t, "Service.Type"); got != "oneshot" {
		t.Errorf("Type=%s, want oneshot", got)
	}
	if got := u.one(t, "Service.RemainAfterExit"); got != "yes" {
		t.Errorf("RemainAfterExit=%s: systemctl is-active must report the verdict", got)
	}
	if !slices.Contains(u.words("Unit.After"), "nodereg.service") {
		t.Error("verify must run after the boot run")
	}
	notOnline(t, u)
	if len(u["Service.Restart"]) != 0 {
		t.Error("a failed check must stay failed, not be retried into a pass")
	}
}

// Each service takes the shared NODEREG_ARGS and then its own variable, so
// /etc/default/nodereg can give one unit flags the others must not get;
// both come after the unit's fixed flags, so an admin's flag has the last
// word.
func TestEachServiceHasItsOwnArgs(t *testing.T) {
	for name, own := range map[string]string{
		"nodereg.service":         "$NODEREG_BOOT_ARGS",
		"nodereg-update.service":  "$NODEREG_UPDATE_ARGS",
		"nodereg-reset.service":   "$NODEREG_RESET_ARGS",
		"nodereg-install.service": "$NODEREG_INSTALL_ARGS",
		"nodereg-verify.service":  "$NODEREG_VERIFY_ARGS",
	} {
		exec := strings.Fields(parseUnit(t, name).one(t, "Service.ExecStart"))
		if n := len(exec); n < 3 || exec[0] != agentPath || exec[n-2] != "$NODEREG_ARGS" || exec[n-1] != own {
			t.Errorf("%s: ExecStart=%v, want %s [fixed flags] $NODEREG_ARGS %s", name, exec, agentPath, own)
		}
	}
}

// notOnline: a boot unit of the agent neither pulls in nor waits for
// network-online.target. On a segment without DHCP NetworkManager-wait-online
// waits a minute for leases that never come, while the agent is what brings
// the network up; it waits for the server itself (docs/boot-timeline.md).
func notOnline(t *testing.T, u unitFile) {
	t.Helper()
	for _, key := range []string{"Unit.After", "Unit.Wants", "Unit.Requires"} {
		if slices.Contains(u.words(key), "network-online.target") {
			t.Errorf("%s= %v holds network-online.target: the DHCP-less boot would wait a minute for it", key, u.words(key))
		}
	}
}
