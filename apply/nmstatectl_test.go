package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/nodereg/nodereg/internal/host"
)

// What the real nmstatectl wrote to stderr (testdata/nmstatectl-stderr,
// from the shared transcripts): the error the agent reports is
// nmstatectl's error line, every log line goes to the debug log, and a
// success reports nothing. The wanted lines are the transcripts' own.
func TestNmstatectlStderrKeptApartFromItsError(t *testing.T) {
	cases := []struct {
		name    string
		message string // "" for a success
		logs    int    // log lines (banner, INFO, WARN)
	}{
		{"01-version", "", 1},
		{"04-gc-unknown-key", "NmstateError: InvalidArgument: Invalid YAML string: interfaces: unknown field `frobnicate`, expected one of `enabled`, `dhcp`, `autoconf`, `dhcp-client-id`, `dhcp-duid`, `address`, `auto-dns`, `auto-gateway`, `auto-routes`, `auto-route-table-id`, `auto-route-metric`, `addr-gen-mode`, `allow-extra-address`, `token`, `dhcp-send-hostname`, `dhcp-custom-hostname` at line 2 column 1", 1},
		{"05-gc-unknown-iface-type", "", 3},
		{"06-apply-no-commit", "", 5},
		{"07-commit", "", 1},
		{"12-apply-missing-interface", "NmstateError: InvalidArgument: Ethernet interface eth9 does not exists", 1},
		{"14-apply-no-commit-second", "NmstateError: Bug: CheckpointConflict: Another checkpoint exists, please wait its timeout or destroy it", 2},
		{"16-commit-no-checkpoint", "NmstateError: Bug: NotFound: Not active checkpoints", 1},
		{"17-rollback-no-checkpoint", "NmstateError: Bug: NotFound: Not active checkpoints", 1},
		{"18-arg-quiet", "error: Found argument '--quiet' which wasn't expected, or isn't valid in this context", 0},
		{"19-arg-verbose", "error: Found argument '--verbose' which wasn't expected, or isn't valid in this context", 0},
		{"20-arg-timeout-not-number", "invalid digit found in string", 1},
		{"21-arg-unknown-subcommand", "error: Found argument 'frobnicate' which wasn't expected, or isn't valid in this context", 0},
		{"25-rename-apply-nrnode1", "", 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join("testdata", "nmstatectl-stderr", tc.name+".stderr")
			stderr, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			rcText, err := os.ReadFile(filepath.Join("testdata", "nmstatectl-stderr", tc.name+".rc"))
			if err != nil {
				t.Fatal(err)
			}
			rc, err := strconv.Atoi(strings.TrimSpace(string(rcText)))
			if err != nil {
				t.Fatal(err)
			}
			if (rc == 0) != (tc.message == "") {
				t.Fatalf("the transcript exits %d; the case says message %q", rc, tc.message)
			}
			logger, hook := logtest.NewNullLogger()
			logger.SetLevel(logrus.DebugLevel)
			// A process that writes the transcript's stderr and exits
			// with its code, through the real runner.
			c := host.Command{Name: "sh", Args: []string{"-c", `cat "$0" >&2; exit "$1"`, file, strconv.Itoa(rc)}}
			_, err = runNmstatectl(context.Background(), host.ExecRunner{}.Run, logrus.NewEntry(logger), c)
			var ne *NmstatectlError
			switch {
			case tc.message == "" && err != nil:
				t.Fatalf("success reported as %v", err)
			case tc.message != "" && !errors.As(err, &ne):
				t.Fatalf("got %v, want an *NmstatectlError", err)
			case tc.message != "":
				if ne.Message != tc.message {
					t.Errorf("message %q, want %q", ne.Message, tc.message)
				}
				msg := err.Error()
				if !strings.HasSuffix(msg, ": "+tc.message) || strings.ContainsAny(msg, "\r\n") {
					t.Errorf("error %q does not end with the error line alone on one line", msg)
				}
				if strings.Contains(msg, "Nmstate version") || strings.Contains(msg, " INFO ") || strings.Contains(msg, "USAGE") {
					t.Errorf("error %q quotes nmstatectl's log or usage", msg)
				}
				var ce *host.CommandError
				if !errors.As(err, &ce) || ce.ExitCode != rc {
					t.Errorf("error does not unwrap to the command's exit %d: %v", rc, err)
				}
			}
			var logged []string
			for _, e := range hook.AllEntries() {
				if e.Level != logrus.DebugLevel {
					t.Errorf("nmstatectl's %q logged at %s, want debug", e.Message, e.Level)
				}
				logged = append(logged, e.Message)
			}
			if len(logged) != tc.logs {
				t.Errorf("logged %d lines, want %d: %q", len(logged), tc.logs, logged)
			}
			for _, l := range logged {
				if !strings.Contains(string(stderr), l+"\n") || !strings.HasPrefix(l, "[<TIME> ") {
					t.Errorf("logged %q, not a log line of the transcript", l)
				}
			}
			if tc.logs > 0 && !strings.Contains(logged[0], "Nmstate version: 2.2.38") {
				t.Errorf("the banner was not logged: %q", logged)
			}
		})
	}
}

// Through the stand-in, which replays the real tool's refusal of a
// missing interface (transcript 12) with its banner first on stderr: the
// live apply's error, as the agent keeps and reports it (one line), is
// nmstatectl's error line, not its banner.
func TestApplyLiveReportsNmstatectlsErrorLine(t *testing.T) {
	a := newStub(t).applier(t.TempDir(), "NMSTATECTL_STUB_INTERFACES=eth9")
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	a.Log = logrus.NewEntry(logger)
	p := mustPlan(t, a, renderVector(t, "192.168.122.150"))
	err := a.ApplyLive(context.Background(), p, nil)
	var ne *NmstatectlError
	if !errors.As(err, &ne) || !errors.Is(err, ErrRolledBack) {
		t.Fatalf("got %v, want a rolled-back *NmstatectlError", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, ": NmstateError: InvalidArgument: Ethernet interface ") || !strings.Contains(msg, " does not exists") ||
		strings.Contains(msg, "Nmstate version") || strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error %q is not nmstatectl's error line on one line", msg)
	}
	banner := false
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "Nmstate version: ") {
			banner = true
			if e.Level != logrus.DebugLevel {
				t.Errorf("the banner logged at %s", e.Level)
			}
		}
	}
	if !banner {
		t.Error("nmstatectl's banner was not logged at debug")
	}
}
