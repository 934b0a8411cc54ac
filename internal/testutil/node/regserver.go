package node

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a server-like program started by a test that prints
// "listening on ADDR" as its first stdout line once it accepts connections
// (regserver, the lab's relay).
type Process struct {
	Cmd *exec.Cmd
	// Listening is ADDR as the program printed it.
	Listening string
	Stderr    *Log
	done      chan struct{}
}

// StartProcess runs argv, waits for its "listening on" line (30 s at most)
// and kills it when the test ends.
func StartProcess(tb testing.TB, argv ...string) *Process {
	tb.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	p := &Process{Cmd: cmd, Stderr: &Log{}, done: make(chan struct{})}
	cmd.Stderr = p.Stderr
	out, err := cmd.StdoutPipe()
	Must(tb, err)
	Must(tb, cmd.Start())
	go func() { _ = cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.Kill)
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		l, _ := br.ReadString('\n')
		lines <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case l := <-lines:
		addr, ok := strings.CutPrefix(strings.TrimSpace(l), "listening on ")
		if !ok {
			tb.Fatalf("%s did not start: %q\n%s", argv[0], l, p.Stderr.String())
		}
		p.Listening = addr
	case <-time.After(30 * time.Second):
		tb.Fatalf("%s printed no address in 30 s\n%s", argv[0], p.Stderr.String())
	}
	return p
}

// Signal sends sig to the process (by its PID) and waits for it to exit.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.Cmd.Process.Signal(sig); err != nil {
		return err
	}
	<-p.done
	return nil
}

// Kill sends SIGKILL to the process (by its PID) and reaps it; a process
// that already exited is left alone.
func (p *Process) Kill() {
	if p.Cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Signal(syscall.SIGKILL)
}

// Regserver is a regserver process started by a test.
type Regserver struct {
	*Process
	// Base is scheme://host:port as the server printed it.
	Base string
}

// StartRegserver runs bin with args (which should listen on port 0) and
// waits for the "listening on" line. prefix, if any, is put before bin
// (e.g. ip netns exec NAME). The process is killed when the test ends.
func StartRegserver(tb testing.TB, prefix []string, bin string, args ...string) *Regserver {
	tb.Helper()
	p := StartProcess(tb, append(append(append([]string{}, prefix...), bin), args...)...)
	return &Regserver{Process: p, Base: p.Listening}
}

// URL is the registration URL for token.
func (rs *Regserver) URL(token string) string {
	return fmt.Sprintf("%s/elemental/registration/%s", rs.Base, token)
}
