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

// Regserver is a regserver process started by a test.
type Regserver struct {
	Cmd *exec.Cmd
	// Base is scheme://host:port as the server printed it.
	Base   string
	Stderr *Log
	done   chan struct{}
}

// StartRegserver runs bin with args (which should listen on port 0) and
// waits for the "listening on" line. prefix, if any, is put before bin
// (e.g. ip netns exec NAME). The process is killed when the test ends.
func StartRegserver(tb testing.TB, prefix []string, bin string, args ...string) *Regserver {
	tb.Helper()
	argv := append(append(append([]string{}, prefix...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	rs := &Regserver{Cmd: cmd, Stderr: &Log{}, done: make(chan struct{})}
	cmd.Stderr = rs.Stderr
	out, err := cmd.StdoutPipe()
	Must(tb, err)
	Must(tb, cmd.Start())
	go func() { _ = cmd.Wait(); close(rs.done) }()
	tb.Cleanup(func() { rs.Kill() })
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		l, _ := br.ReadString('\n')
		lines <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	select {
	case l := <-lines:
		const p = "listening on "
		if !strings.HasPrefix(l, p) {
			tb.Fatalf("regserver did not start: %q\n%s", l, rs.Stderr.String())
		}
		rs.Base = strings.TrimSpace(strings.TrimPrefix(l, p))
	case <-time.After(30 * time.Second):
		tb.Fatalf("regserver printed no address in 30 s\n%s", rs.Stderr.String())
	}
	return rs
}

// Kill sends SIGKILL to the server's process (by its PID) and reaps it.
func (rs *Regserver) Kill() {
	if rs.Cmd.Process == nil {
		return
	}
	select {
	case <-rs.done:
		return
	default:
	}
	_ = rs.Cmd.Process.Signal(syscall.SIGKILL)
	<-rs.done
}

// URL is the registration URL for token.
func (rs *Regserver) URL(token string) string {
	return fmt.Sprintf("%s/elemental/registration/%s", rs.Base, token)
}
