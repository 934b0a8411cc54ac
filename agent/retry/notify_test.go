package retry_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/systemd"
)

// pendingErr is what the agent gets while the server's address claims are
// not bound yet (MsgError reason WaitingForIPAddress, retryAfterSeconds).
type pendingErr struct{ seconds int }

func (e pendingErr) Error() string {
	return "WaitingForIPAddress: addresses pending"
}
func (e pendingErr) RetryAfter() time.Duration { return time.Duration(e.seconds) * time.Second }

// TestWaitIsReportedToSystemd runs the boot run's shape (phases, a wait for
// addresses, READY) against a real unixgram NOTIFY_SOCKET, the way the agent
// wires Policy.OnWait to the notifier.
func TestWaitIsReportedToSystemd(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)

	n := systemd.New(nil)
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Deadline: 10 * time.Minute, Clock: clock, OnWait: n.RetryHook("network", time.Minute)}

	n.Status("register", "registered")
	replies := []error{pendingErr{15}, pendingErr{30}, nil}
	err = p.Do(context.Background(), "network config", func(_ context.Context, attempt int) error {
		return replies[attempt-1]
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	n.Status("apply", "2 interfaces")
	n.Ready()

	want := []string{
		"STATUS=register: registered",
		"EXTEND_TIMEOUT_USEC=75000000",
		"STATUS=network: attempt 1: WaitingForIPAddress: addresses pending; next try in 15s",
		"EXTEND_TIMEOUT_USEC=90000000",
		"STATUS=network: attempt 2: WaitingForIPAddress: addresses pending; next try in 30s",
		"STATUS=apply: 2 interfaces",
		"READY=1\nSTATUS=ready (apply: 2 interfaces)",
	}
	buf := make([]byte, 4096)
	for i, w := range want {
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		k, _, err := conn.ReadFromUnix(buf)
		if err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if got := string(buf[:k]); got != w {
			t.Errorf("datagram %d = %q, want %q", i, got, w)
		}
	}
	if got := fmt.Sprint(clock.Waits()); got != "[15s 30s]" {
		t.Errorf("waits = %s, want the server's hints [15s 30s]", got)
	}
}
