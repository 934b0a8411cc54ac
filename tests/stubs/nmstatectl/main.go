// Command nmstatectl is the stand-in for nmstate's nmstatectl 2.2.38 at the
// process boundary, for machines where the real tool is not installable
// (docs/apply.md, "The nmstatectl stand-in"). It replays what the real tool
// was recorded doing (testdata/transcripts, checked by the contract test):
// its command line as clap parses it, the "Nmstate version" banner and log
// lines on stderr, its error texts and exit codes, and its output.
//
//   - gc is the built-in translator (package nmstate), which reproduces
//     nmstate's gen_conf byte for byte; the stand-in only adds gc's
//     warnings, log lines and YAML layout.
//   - apply, commit, rollback and show go through a real NetworkManager
//     when one is reachable on a private bus (DBUS_SYSTEM_BUS_ADDRESS set,
//     as the boot simulation and apply's NetworkManager tests do): profiles
//     by nmcli, checkpoints by NetworkManager's D-Bus API (busctl), so
//     NetworkManager writes its own keyfiles. It never talks to the
//     machine's default system bus.
//   - Without one it keeps an offline model of that NetworkManager in
//     NMSTATECTL_STUB_STATE (one pending checkpoint, the profiles it made),
//     with the same texts and the same refusals.
//
// What the transcripts do not show it declines (exit 70, "stub: ..."),
// rather than guess.
//
// Environment:
//
//	NMSTATECTL_STUB_LOG        append one JSON line per call: {"args":[...],"stdin":"..."}
//	NMSTATECTL_STUB_STATE      offline mode: the pending checkpoint (this file
//	                           exists while one is pending) and, next to it
//	                           (FILE.nm.json), the profiles made
//	NMSTATECTL_STUB_INTERFACES offline mode: comma list of the kernel's
//	                           ethernet interfaces (unset: the kernel's ethernet links)
//	NMSTATECTL_STUB_FAIL       comma list of subcommands that fail with exit 1
//	NMSTATECTL_STUB_HANG       comma list of subcommands that hang until killed
//	NMSTATECTL_STUB_VERSION    version to report (default 2.2.38)
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// version is the recorded tool's (testdata/transcripts/01-version).
const version = "2.2.38"

// exitError is an exit with a message on stderr, printed as is.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// nmErr is nmstate's error line: "NmstateError: <Kind>: <message>", exit 1.
func nmErr(kind, format string, a ...any) error {
	return &exitError{1, "NmstateError: " + kind + ": " + fmt.Sprintf(format, a...)}
}

// declined is what the stand-in does not model (no transcript shows it).
func declined(format string, a ...any) error {
	return &exitError{70, "stub: " + fmt.Sprintf(format, a...) + " (not modelled: no transcript of the real nmstatectl shows it; docs/apply.md)"}
}

func main() {
	stdin, err := run(os.Args[1:])
	logCall(os.Args[1:], stdin)
	if err != nil {
		var ee *exitError
		code := 1
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(code)
	}
}

func logCall(args []string, stdin []byte) {
	p := os.Getenv("NMSTATECTL_STUB_LOG")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub: log:", err)
		os.Exit(70)
	}
	defer f.Close()
	if args == nil {
		args = []string{}
	}
	line, _ := json.Marshal(struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin,omitempty"`
	}{args, string(stdin)})
	f.Write(append(line, '\n'))
}

func listed(env, sub string) bool {
	for _, s := range strings.Split(os.Getenv(env), ",") {
		if strings.TrimSpace(s) == sub {
			return true
		}
	}
	return false
}

func reportedVersion() string {
	if v := os.Getenv("NMSTATECTL_STUB_VERSION"); v != "" {
		return v
	}
	return version
}

// logLine writes one env_logger line as nmstatectl's: "[TIME LEVEL target] msg".
func logLine(level, target, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s %-5s %s] %s\n", time.Now().UTC().Format("2006-01-02T15:04:05Z"), level, target, fmt.Sprintf(format, a...))
}

func info(target, format string, a ...any) { logLine("INFO", target, format, a...) }

// run returns what it read from stdin (for the call log) and the outcome.
func run(args []string) ([]byte, error) {
	cmd, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	// nmstatectl logs its version once its arguments parsed (01-version).
	info("nmstatectl", "Nmstate version: %s", reportedVersion())
	var stdin []byte
	readStdin := func() {
		if cmd.name == "apply" || cmd.name == "gc" {
			stdin, _ = readInput(cmd.files)
		}
	}
	if listed("NMSTATECTL_STUB_HANG", cmd.name) {
		readStdin()
		if cmd.name == "apply" {
			// The real tool creates the checkpoint before it can hang.
			if err := hangCheckpoint(); err != nil {
				return stdin, err
			}
		}
		// Killed while hanging, main never logs: record the call now.
		logCall(args, stdin)
		for {
			time.Sleep(time.Hour)
		}
	}
	if listed("NMSTATECTL_STUB_FAIL", cmd.name) {
		// Fail before acting: a failed commit or rollback leaves the
		// checkpoint, a failed apply has rolled its own back.
		readStdin()
		return stdin, nmErr("PluginFailure", "stub: %s failed as told", cmd.name)
	}
	switch cmd.name {
	case "version":
		fmt.Printf("nmstatectl %s\n", reportedVersion())
		return nil, nil
	case "gc":
		if stdin, err = readInput(cmd.files); err != nil {
			return stdin, err
		}
		return stdin, gc(stdin)
	case "apply":
		// The timeout is parsed after the banner (20-arg-timeout-not-number).
		timeout, err := parseTimeout(cmd.timeout)
		if err != nil {
			return nil, err
		}
		if stdin, err = readInput(cmd.files); err != nil {
			return stdin, err
		}
		return stdin, apply(stdin, applyOpts{noCommit: cmd.noCommit, memoryOnly: cmd.memoryOnly, timeout: timeout})
	case "commit", "rollback":
		return nil, finish(cmd.name, cmd.checkpoint)
	case "show":
		return nil, show(cmd.iface)
	}
	return nil, declined("nmstatectl %s", cmd.name)
}

// readInput reads the state file, or stdin for "-" or none.
func readInput(files []string) ([]byte, error) {
	if len(files) == 0 || (len(files) == 1 && files[0] == "-") {
		return io.ReadAll(os.Stdin)
	}
	if len(files) > 1 {
		return nil, declined("more than one state file")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return nil, declined("reading %s: %v", files[0], err)
	}
	return b, nil
}

// backend is the NetworkManager the stand-in acts on: a real one (live) or
// its offline model.
type backend interface {
	// hasEthernet reports whether an ethernet device named name exists.
	hasEthernet(name string) (bool, error)
	// profile is the profile that apply would modify for the interface
	// (nil: apply creates one).
	profile(iface string) (*profile, error)
	createCheckpoint(timeout uint32) (string, error)
	checkpoints() ([]string, error)
	destroyCheckpoint(path string) error
	rollbackCheckpoint(path string) error
	// put creates (under p.UUID, nmstate picks it) or modifies a profile
	// from gc's keyfile kf and activates it.
	put(p *profile, kf []byte, create, memoryOnly bool) error
}

func currentBackend() (backend, error) {
	if nm, ok, err := liveNM(); err != nil || ok {
		return nm, err
	}
	return offlineNM()
}
