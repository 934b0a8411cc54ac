package systemd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// listen starts a unixgram socket standing in for systemd's notify socket
// and points NOTIFY_SOCKET at it.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	// A short directory keeps the path inside sun_path's 108 bytes.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "notify.sock")
	return listenAt(t, sock)
}

func listenAt(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listening on %s: %v", name, err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return conn
}

// next returns the next datagram. The deadline only bounds a failing test.
func next(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		t.Fatalf("reading the notify socket: %v", err)
	}
	return string(buf[:n])
}

// assertDrained checks nothing more was sent. Every send completes before
// the notifier's method returns, so an already expired deadline is enough.
func assertDrained(t *testing.T, conn *net.UnixConn) {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFromUnix(buf)
	var ne net.Error
	if err == nil {
		t.Errorf("unexpected extra datagram %q", buf[:n])
	} else if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("reading the notify socket: %v", err)
	}
}

func newLogged() (*Notifier, *logtest.Hook) {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	return New(logrus.NewEntry(log)), hook
}

func warnings(hook *logtest.Hook) int {
	n := 0
	for _, e := range hook.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			n++
		}
	}
	return n
}

func TestPhasesExtendAndReadyLast(t *testing.T) {
	conn := listen(t)
	n, hook := newLogged()

	n.Status("config", "")
	n.Status("register", "wss://reg.example/elemental/registration/abc")
	n.Extend(95 * time.Second)
	n.Status("network", "waiting for addresses\n(attempt 2)")
	n.Extend(1500 * time.Millisecond)
	n.Ready()

	want := []string{
		"STATUS=config",
		"STATUS=register: wss://reg.example/elemental/registration/abc",
		"EXTEND_TIMEOUT_USEC=95000000",
		"STATUS=network: waiting for addresses (attempt 2)",
		"EXTEND_TIMEOUT_USEC=1500000",
		"READY=1\nSTATUS=ready (network: waiting for addresses (attempt 2))",
	}
	for i, w := range want {
		if got := next(t, conn); got != w {
			t.Errorf("datagram %d = %q, want %q", i, got, w)
		}
	}
	assertDrained(t, conn)
	if w := warnings(hook); w != 0 {
		t.Errorf("%d warnings logged on a working socket", w)
	}
}

func TestExtendIgnoresNonPositive(t *testing.T) {
	conn := listen(t)
	n := New(nil)
	n.Extend(0)
	n.Extend(-time.Second)
	n.Ready()
	if got := next(t, conn); got != "READY=1\nSTATUS=ready" {
		t.Errorf("first datagram = %q, want only READY", got)
	}
	assertDrained(t, conn)
}

func TestAbstractSocket(t *testing.T) {
	conn := listenAt(t, fmt.Sprintf("@nodereg-test-%d", os.Getpid()))
	var n Notifier // the zero value works too
	n.Status("identity", "TPM EK hash ready")
	if got := next(t, conn); got != "STATUS=identity: TPM EK hash ready" {
		t.Errorf("got %q", got)
	}
}

func TestWatchdogPings(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "20000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n := New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	n.StartWatchdog(ctx)
	// The first ping is synchronous; the second proves the ticker runs.
	for i := range 2 {
		if got := next(t, conn); got != "WATCHDOG=1" {
			t.Errorf("datagram %d = %q, want WATCHDOG=1", i, got)
		}
	}
	cancel()
	n.wg.Wait()
}

func TestWatchdogDisabled(t *testing.T) {
	for _, c := range []struct{ name, usec, pid string }{
		{"no WatchdogSec", "", ""},
		{"another process's watchdog", "20000", "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := listen(t)
			t.Setenv("WATCHDOG_USEC", c.usec)
			t.Setenv("WATCHDOG_PID", c.pid)
			n, hook := newLogged()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n.StartWatchdog(ctx)
			n.Ready()
			if got := next(t, conn); got != "READY=1\nSTATUS=ready" {
				t.Errorf("first datagram = %q, want READY (no watchdog ping)", got)
			}
			assertDrained(t, conn)
			if w := warnings(hook); w != 0 {
				t.Errorf("%d warnings logged", w)
			}
		})
	}
}

func TestWatchdogBadSetting(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "soon")
	n, hook := newLogged()
	n.StartWatchdog(context.Background())
	n.Ready()
	if got := next(t, conn); got != "READY=1\nSTATUS=ready" {
		t.Errorf("first datagram = %q, want READY", got)
	}
	if w := warnings(hook); w != 1 {
		t.Errorf("%d warnings for an unparsable WATCHDOG_USEC, want 1", w)
	}
}

func TestNoOpOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "20000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n, hook := newLogged()
	ctx, cancel := context.WithCancel(context.Background())
	n.StartWatchdog(ctx)
	n.Status("register", "dialing")
	n.Extend(time.Minute)
	n.Ready()
	cancel()
	n.wg.Wait()
	if w := warnings(hook); w != 0 {
		t.Errorf("%d warnings logged without NOTIFY_SOCKET, want none", w)
	}
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.DebugLevel && len(e.Message) > 9 && e.Message[:9] == "sd_notify" {
			t.Errorf("claims to have sent %q without a socket", e.Message)
		}
	}

	var nilN *Notifier
	nilN.Status("x", "y")
	nilN.Extend(time.Second)
	nilN.Ready()
	nilN.StartWatchdog(context.Background())
}

func TestBrokenSocketWarnsOnce(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	n, hook := newLogged()
	n.Status("register", "dialing")
	n.Extend(time.Minute)
	n.Ready()
	if w := warnings(hook); w != 1 {
		t.Errorf("%d warnings for an unreachable socket, want exactly 1", w)
	}
}

func TestRetryHookExtendsThenSaysWhy(t *testing.T) {
	conn := listen(t)
	n := New(nil)
	hook := n.RetryHook("network", 2*time.Minute)
	hook(3, 45*time.Second, errors.New("WaitingForIPAddress: 2 claims pending\nfor pool lab"))
	for i, w := range []string{
		"EXTEND_TIMEOUT_USEC=165000000",
		"STATUS=network: attempt 3: WaitingForIPAddress: 2 claims pending for pool lab; next try in 45s",
	} {
		if got := next(t, conn); got != w {
			t.Errorf("datagram %d = %q, want %q", i, got, w)
		}
	}
	assertDrained(t, conn)
}
