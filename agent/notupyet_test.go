package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
)

// A dial that failed because the node has no route yet is retried after a
// fixed second, still as a retryable 75; a refusal by the far end keeps
// the backoff curve.
func TestNotUpYetRetriesSoon(t *testing.T) {
	unreach := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	noAddr := fmt.Errorf("registration: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.EADDRNOTAVAIL)})
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		err  error
		hint time.Duration
	}{
		{"no route", unreach, notUpYetRetry},
		{"no source address", noAddr, notUpYetRetry},
		{"refused", refused, 0},
	} {
		got := classifyRegister(c.err)
		var h retry.RetryAfterer
		hint := time.Duration(0)
		if errors.As(got, &h) {
			hint = h.RetryAfter()
		}
		if hint != c.hint || !exitcode.Retryable(got) || exitcode.Of(got) != 75 || !errors.Is(got, c.err.(interface{ Unwrap() error }).Unwrap()) {
			t.Errorf("%s: hint %s retryable %v exit %d, want hint %s, retryable 75, the cause kept", c.name, hint, exitcode.Retryable(got), exitcode.Of(got), c.hint)
		}
	}
}

// Through the real retry loop: attempts after "no route" are a second
// apart, not doubling.
func TestNotUpYetKeepsTheWaitFlat(t *testing.T) {
	var waits []time.Duration
	p := retry.Policy{MaxAttempts: 5, Rand: func() float64 { return 0.5 },
		OnWait: func(_ int, d time.Duration, _ error) { waits = append(waits, d) },
		Clock:  retrytest.NewClock(time.Unix(0, 0))}
	_ = p.Do(context.Background(), "registration", func(context.Context, int) error {
		return classifyRegister(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)})
	})
	if len(waits) != 4 {
		t.Fatalf("waits %v, want 4", waits)
	}
	for _, w := range waits {
		if w != notUpYetRetry {
			t.Errorf("waits %v, want each %s", waits, notUpYetRetry)
		}
	}
}
