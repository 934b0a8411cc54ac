package labkit

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// readyWithin bounds the wait for a started program to say it listens: a
// hang (a program that never binds), not its speed, on a loaded machine.
const readyWithin = time.Minute

// pollEvery is how often a wait looks again.
const pollEvery = 10 * time.Millisecond

// Process is a server-like program started by a lab that prints
// "listening on ADDR" on stdout once it accepts connections (regserver,
// tests/lab's relay).
type Process struct {
	Cmd *exec.Cmd
	// Listening is ADDR as the program printed it.
	Listening string
	// Stdout and Stderr are the program's output so far.
	Stdout, Stderr *testutil.Log
	logFile        *os.File
	done           chan struct{}
}

// StartProcess runs argv, waits for its "listening on" line and kills it
// when the test ends.
func StartProcess(tb testing.TB, argv ...string) *Process {
	tb.Helper()
	p, err := launch(argv, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Kill)
	return p
}

// launch starts argv with its output in memory (and appended to logFile,
// when named) and polls its stdout until the "listening on" line comes,
// the program exits, or readyWithin passes.
func launch(argv []string, logFile string) (*Process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	p := &Process{Cmd: cmd, Stdout: &testutil.Log{}, Stderr: &testutil.Log{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		p.logFile = f
		cmd.Stdout, cmd.Stderr = io.MultiWriter(p.Stdout, f), io.MultiWriter(p.Stderr, f)
	}
	if err := cmd.Start(); err != nil {
		p.closeLog()
		return nil, fmt.Errorf("starting %s: %w", strings.Join(argv, " "), err)
	}
	go func() { _ = cmd.Wait(); p.closeLog(); close(p.done) }()
	err := poll(p, "a \"listening on\" line from "+argv[0], func() (bool, error) {
		addr, ok := p.line("listening on ")
		p.Listening = addr
		return ok, nil
	})
	if err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

func (p *Process) closeLog() {
	if p.logFile != nil {
		p.logFile.Close()
	}
}

// line is the rest of the first stdout line that starts with prefix.
func (p *Process) line(prefix string) (string, bool) {
	for _, l := range strings.Split(p.Stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			return rest, true
		}
	}
	return "", false
}

// poll checks cond until it holds, the process exits or readyWithin
// passes; the error names what was awaited and carries the program's
// output.
func poll(p *Process, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(readyWithin)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if p.Exited() {
			return &ExitedError{What: what, State: p.Cmd.ProcessState, Stdout: p.Stdout.String(), Stderr: p.Stderr.String()}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: nothing after %v (last: %v)\nstdout:\n%s\nstderr:\n%s", what, readyWithin, last, p.Stdout, p.Stderr)
		}
		time.Sleep(pollEvery)
	}
}

// ExitedError is a start that ended with the program: it exited before it
// was ready. A case for which that is an outcome (a regserver refusing a
// damaged store) reads its exit status and output.
type ExitedError struct {
	What           string
	State          *os.ProcessState
	Stdout, Stderr string
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("waiting for %s: the program exited (%v)\nstdout:\n%s\nstderr:\n%s", e.What, e.State, e.Stdout, e.Stderr)
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process (by its PID) and waits for it to exit.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return err
	}
	<-p.done
	return nil
}

// Stop ends the process as a service manager would: SIGTERM, then SIGKILL
// after grace; it says whether the process ended within grace (or had
// already), its status then in Cmd.ProcessState.
func (p *Process) Stop(grace time.Duration) bool {
	if p == nil || p.Exited() {
		return true
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// Kill sends SIGKILL to the process (by its PID) and reaps it; a process
// that already exited is left alone.
func (p *Process) Kill() {
	if p == nil || p.Cmd.Process == nil || p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
}

// Regserver is a regserver process started by a lab.
type Regserver struct {
	*Process
	// Base is scheme://host:port as the server printed it.
	Base string
	// Bin is the binary it runs, for the commands a test runs beside it
	// (store export).
	Bin string
	// Admin is its admin API when it has one (--admin-listen), with the
	// token it requires.
	Admin Admin
}

// RegserverOptions are how a lab runs regserver.
type RegserverOptions struct {
	// NS is the network namespace it runs in ("" for the test's own).
	NS string
	// Bin is the binary; "" is ./cmd/regserver from the shared build.
	Bin string
	// Args are its flags. With --admin-listen the start waits until the
	// admin API answers, with the token of --admin-token-file, of
	// AdminToken, or the one regserver generated.
	Args []string
	// AdminToken, when set, is written to a 0600 file passed as
	// --admin-token-file (at AdminTokenFile, else beside LogFile).
	AdminToken, AdminTokenFile string
	// LogFile, when set, gets the output appended too: a lab's artefact
	// that outlives restarts.
	LogFile string
	// ListenOnly ends the wait at the listening lines, before the admin
	// API answers: for a case whose server may fail its requests.
	ListenOnly bool
}

// StartRegserver runs regserver on the test's own network with args (from
// the shared build) and stops it when the test ends; see
// RegserverOptions.Start.
func StartRegserver(tb testing.TB, args ...string) *Regserver {
	tb.Helper()
	return RegserverOptions{Args: args}.Start(tb)
}

// Start runs regserver as o says, waits until it is ready, and kills it
// when the test ends; if the test failed, its log is in the test's
// output.
func (o RegserverOptions) Start(tb testing.TB) *Regserver {
	tb.Helper()
	rs, err := o.Launch()
	if err != nil {
		tb.Fatalf("regserver: %v", err)
	}
	tb.Cleanup(func() {
		rs.Kill()
		if tb.Failed() {
			tb.Logf("regserver's log (%s):\n%s", rs.Base, rs.LogTail())
		}
	})
	return rs
}

// Launch is Start for a TestMain, with no test to fail: the caller stops
// the server it gets.
func (o RegserverOptions) Launch() (*Regserver, error) {
	bin := o.Bin
	if bin == "" {
		var err error
		if bin, err = testbin.Path("./cmd/regserver"); err != nil {
			return nil, err
		}
	}
	args := append([]string{}, o.Args...)
	if o.AdminToken != "" {
		file := o.AdminTokenFile
		if file == "" {
			file = filepath.Join(filepath.Dir(o.LogFile), "regserver.admin-token")
		}
		if err := os.WriteFile(file, []byte(o.AdminToken+"\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--admin-token-file", file)
	}
	argv := append([]string{bin}, args...)
	if o.NS != "" {
		argv = InNS(o.NS, argv...)
	}
	p, err := launch(argv, o.LogFile)
	if err != nil {
		return nil, err
	}
	rs := &Regserver{Process: p, Base: p.Listening, Bin: bin}
	if _, ok := flagValue(args, "admin-listen"); ok {
		if err := rs.awaitAdmin(o.NS, args, !o.ListenOnly); err != nil {
			p.Kill()
			return nil, err
		}
	}
	return rs, nil
}

// awaitAdmin finds the admin API regserver printed and, with answered,
// polls it until it answers, so that a case's first admin call meets a
// server that is up.
func (rs *Regserver) awaitAdmin(ns string, args []string, answered bool) error {
	var addr string
	err := poll(rs.Process, "regserver's \"admin listening on\" line", func() (bool, error) {
		u, ok := rs.line("admin listening on ")
		if !ok {
			return false, nil
		}
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" {
			return false, fmt.Errorf("admin address %q: %v", u, err)
		}
		addr = parsed.Host
		return true, nil
	})
	if err != nil {
		return err
	}
	tokenFile, ok := flagValue(args, "admin-token-file")
	if !ok {
		// Generated: its path follows on the next line.
		if err := poll(rs.Process, "regserver's \"admin token in\" line", func() (bool, error) {
			tokenFile, ok = rs.line("admin token in ")
			return ok, nil
		}); err != nil {
			return err
		}
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("regserver's admin token: %w", err)
	}
	rs.Admin = Admin{NS: ns, Addr: addr, Token: strings.TrimSpace(string(tok))}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "::" || host == "0.0.0.0") {
		rs.Admin.Addr = net.JoinHostPort("127.0.0.1", port)
	}
	if !answered {
		return nil
	}
	return poll(rs.Process, "regserver's admin API at "+rs.Admin.Addr, func() (bool, error) {
		_, err := rs.Admin.Do(http.MethodGet, "/admin/pools")
		return err == nil, err
	})
}

// LogTail is the end of regserver's log, enough for a failure message.
func (rs *Regserver) LogTail() string { return tail(rs.Stderr.String()) }

// Stop is Process.Stop, for a lab whose server may not have started yet.
func (rs *Regserver) Stop(grace time.Duration) bool {
	return rs == nil || rs.Process.Stop(grace)
}

// URL is the registration URL for token.
func (rs *Regserver) URL(token string) string {
	return fmt.Sprintf("%s/elemental/registration/%s", rs.Base, token)
}

// AdminBase is the admin API's http://host:port, for a test that sends
// its own requests.
func (rs *Regserver) AdminBase() string { return "http://" + rs.Admin.Addr }

// flagValue is the value of --name in args (as "--name v" or "--name=v").
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// tail is the end of a log, enough for a failure message.
func tail(s string) string {
	if len(s) > 8000 {
		return "..." + s[len(s)-8000:]
	}
	return s
}
