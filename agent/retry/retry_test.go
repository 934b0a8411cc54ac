package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
)

var (
	errFlaky = errors.New("connection refused")
	errGone  = errors.New("inventory not found")
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// failing returns an op that fails n times with err and then succeeds, and
// a pointer to the number of calls.
func failing(n int, err error) (func(context.Context, int) error, *int) {
	calls := 0
	return func(_ context.Context, attempt int) error {
		calls++
		if attempt != calls {
			panic(fmt.Sprintf("attempt %d reported on call %d", attempt, calls))
		}
		if calls <= n {
			return err
		}
		return nil
	}, &calls
}

func secs(s ...float64) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

func TestDelaysGrowAndAreCapped(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	type wait struct {
		attempt int
		delay   time.Duration
		err     error
	}
	var seen []wait
	p := retry.Policy{
		Initial: time.Second, Max: 10 * time.Second, Multiplier: 2, Jitter: -1,
		Clock:  clock,
		OnWait: func(a int, d time.Duration, err error) { seen = append(seen, wait{a, d, err}) },
	}
	op, calls := failing(7, errFlaky)
	if err := p.Do(context.Background(), "register", op); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if *calls != 8 {
		t.Errorf("op called %d times, want 8", *calls)
	}
	want := secs(1, 2, 4, 8, 10, 10, 10)
	if got := clock.Waits(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
	if len(seen) != len(want) {
		t.Fatalf("OnWait called %d times, want %d", len(seen), len(want))
	}
	for i, w := range seen {
		if w.attempt != i+1 || w.delay != want[i] || !errors.Is(w.err, errFlaky) {
			t.Errorf("OnWait #%d = (%d, %v, %v), want (%d, %v, %v)", i, w.attempt, w.delay, w.err, i+1, want[i], errFlaky)
		}
	}
	if got, want := clock.Now().Sub(epoch), 45*time.Second; got != want {
		t.Errorf("time spent = %v, want %v", got, want)
	}
}

func TestJitterStaysWithinBounds(t *testing.T) {
	p := retry.Policy{Initial: 2 * time.Second, Max: 30 * time.Second, Multiplier: 3, Jitter: 0.25}
	// The edges of the documented spread: [d*(1-J), d*(1+J)], capped at Max.
	fixed := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, 1500 * time.Millisecond},
		{1, 0.5, 2 * time.Second},
		{2, 0, 4500 * time.Millisecond},
		{2, 0.5, 6 * time.Second},
		{3, 0.5, 18 * time.Second},
		{3, 0, 13500 * time.Millisecond},
		{4, 0, 22500 * time.Millisecond},   // base 54s capped to 30s first
		{4, 0.5, 26250 * time.Millisecond}, // spread below Max, never past it
	}
	for _, c := range fixed {
		if got := p.Delay(c.attempt, c.r); got != c.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", c.attempt, c.r, got, c.want)
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	clock := retrytest.NewClock(epoch)
	p.Clock, p.Rand = clock, rng.Float64
	op, _ := failing(200, errFlaky)
	if err := p.Do(context.Background(), "register", op); err != nil {
		t.Fatalf("Do: %v", err)
	}
	waits := clock.Waits()
	if len(waits) != 200 {
		t.Fatalf("%d waits, want 200", len(waits))
	}
	base := 2 * time.Second
	distinct := map[time.Duration]bool{}
	for i, w := range waits {
		lo, hi := base*3/4, min(base*5/4, 30*time.Second)
		if w < lo || w > hi {
			t.Errorf("wait %d = %v, outside [%v, %v]", i+1, w, lo, hi)
		}
		distinct[w] = true
		base = min(base*3, 30*time.Second)
	}
	if len(distinct) < 190 {
		t.Errorf("only %d distinct delays in 200: jitter is not spreading", len(distinct))
	}
}

func TestDeadlineIsRespected(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Initial: time.Second, Max: time.Minute, Jitter: -1, Deadline: 10 * time.Second, Clock: clock}
	var starts []time.Duration
	err := p.Do(context.Background(), "network config", func(context.Context, int) error {
		starts = append(starts, clock.Now().Sub(epoch))
		return errFlaky
	})
	if !errors.Is(err, retry.ErrDeadline) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v, want it to wrap ErrDeadline and the last failure", err)
	}
	// 1+2+4 = 7s, then the 8s wait is cut to the 3s left so the last
	// attempt runs at the deadline, not after it.
	if want := secs(0, 1, 3, 7, 10); !slices.Equal(starts, want) {
		t.Errorf("attempts started at %v, want %v", starts, want)
	}
	if want := secs(1, 2, 4, 3); !slices.Equal(clock.Waits(), want) {
		t.Errorf("waits = %v, want %v", clock.Waits(), want)
	}
}

func TestDeadlinePassedDuringAttempt(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Deadline: time.Minute, Clock: clock, OnWait: func(int, time.Duration, error) {
		t.Error("OnWait called after the deadline passed")
	}}
	op, calls := failing(5, errFlaky)
	err := p.Do(context.Background(), "register", func(ctx context.Context, a int) error {
		clock.Advance(2 * time.Minute) // a hung dial that finally times out
		return op(ctx, a)
	})
	if !errors.Is(err, retry.ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if *calls != 1 || len(clock.Waits()) != 0 {
		t.Errorf("calls = %d, waits = %v; want 1 call and no wait", *calls, clock.Waits())
	}
}

func TestNotRetryableStopsAtOnce(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Clock: clock, Retryable: func(err error) bool { return !errors.Is(err, errGone) }, OnWait: func(int, time.Duration, error) {
		t.Error("OnWait called for an error not worth retrying")
	}}
	op, calls := failing(5, fmt.Errorf("update: %w", errGone))
	err := p.Do(context.Background(), "register", op)
	if !errors.Is(err, errGone) || errors.Is(err, retry.ErrDeadline) {
		t.Fatalf("err = %v, want the failure wrapping %v", err, errGone)
	}
	if *calls != 1 || len(clock.Waits()) != 0 {
		t.Errorf("calls = %d, waits = %v; want 1 call and no wait", *calls, clock.Waits())
	}
}

func TestClassifierHook(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Clock: clock, Retryable: func(err error) bool { return !errors.Is(err, errGone) }}
	n := 0
	err := p.Do(context.Background(), "register", func(context.Context, int) error {
		n++
		if n < 3 {
			return errFlaky
		}
		return errGone
	})
	if !errors.Is(err, errGone) || errors.Is(err, retry.ErrDeadline) {
		t.Fatalf("err = %v, want the classifier's terminal error", err)
	}
	if n != 3 || len(clock.Waits()) != 2 {
		t.Errorf("calls = %d, waits = %d; want 3 and 2", n, len(clock.Waits()))
	}
}

type waitingErr struct{ after time.Duration }

func (e waitingErr) Error() string             { return "WaitingForIPAddress" }
func (e waitingErr) RetryAfter() time.Duration { return e.after }

func TestRetryAfterHintIsHonoured(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Initial: time.Second, Max: 10 * time.Second, Jitter: -1, MaxRetryAfter: 2 * time.Minute, Clock: clock}
	errs := []error{
		fmt.Errorf("network config: %w", waitingErr{45 * time.Second}), // longer than the backoff: taken
		waitingErr{0},                      // no hint: backoff (attempt 2 -> 2s)
		waitingErr{time.Hour},              // capped by MaxRetryAfter
		waitingErr{500 * time.Millisecond}, // shorter than the backoff: still what the server asked
	}
	err := p.Do(context.Background(), "network config", func(_ context.Context, a int) error {
		if a <= len(errs) {
			return errs[a-1]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	want := []time.Duration{45 * time.Second, 2 * time.Second, 2 * time.Minute, 500 * time.Millisecond}
	if got := clock.Waits(); !slices.Equal(got, want) {
		t.Errorf("waits = %v, want %v", got, want)
	}
}

func TestRetryAfterDoesNotCrossDeadline(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Deadline: 30 * time.Second, Clock: clock}
	err := p.Do(context.Background(), "network config", func(context.Context, int) error {
		return waitingErr{time.Minute}
	})
	if !errors.Is(err, retry.ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if want := secs(30); !slices.Equal(clock.Waits(), want) {
		t.Errorf("waits = %v, want %v", clock.Waits(), want)
	}
}

func TestMaxAttempts(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{MaxAttempts: 3, Clock: clock}
	op, calls := failing(10, errFlaky)
	err := p.Do(context.Background(), "register", op)
	if !errors.Is(err, retry.ErrAttempts) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v, want ErrAttempts wrapping the last failure", err)
	}
	if *calls != 3 || len(clock.Waits()) != 2 {
		t.Errorf("calls = %d, waits = %d; want 3 and 2", *calls, len(clock.Waits()))
	}
}

// stuckClock never fires, so only ctx can end a wait.
type stuckClock struct{}

func (stuckClock) Now() time.Time                       { return epoch }
func (stuckClock) After(time.Duration) <-chan time.Time { return nil }

func TestContextEndsWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := retry.Policy{Clock: stuckClock{}, OnWait: func(int, time.Duration, error) { cancel() }}
	op, calls := failing(10, errFlaky)
	err := p.Do(ctx, "register", op)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) {
		t.Fatalf("err = %v, want context.Canceled and the last failure", err)
	}
	if *calls != 1 {
		t.Errorf("calls = %d, want 1", *calls)
	}

	op, calls = failing(0, nil)
	if err := p.Do(ctx, "register", op); !errors.Is(err, context.Canceled) || *calls != 0 {
		t.Errorf("Do on a done ctx = %v after %d calls, want context.Canceled and no call", err, *calls)
	}
}

func TestDefaults(t *testing.T) {
	var p retry.Policy
	if got := p.Delay(1, 0.5); got != retry.DefaultInitial {
		t.Errorf("zero Policy first delay = %v, want %v", got, retry.DefaultInitial)
	}
	if got, lo := p.Delay(50, 0), time.Duration(float64(retry.DefaultMax)*(1-retry.DefaultJitter)); got != lo {
		t.Errorf("zero Policy lowest late delay = %v, want %v", got, lo)
	}
	if got := p.Delay(50, 0.9999999); got > retry.DefaultMax {
		t.Errorf("zero Policy late delay = %v, above the cap %v", got, retry.DefaultMax)
	}
	if got, lo := p.Delay(1, 0), time.Duration(float64(retry.DefaultInitial)*(1-retry.DefaultJitter)); got != lo {
		t.Errorf("zero Policy lowest first delay = %v, want %v", got, lo)
	}
}

func TestSuccessNeedsNoWait(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	op, calls := failing(0, nil)
	if err := (retry.Policy{Clock: clock}).Do(context.Background(), "register", op); err != nil || *calls != 1 || len(clock.Waits()) != 0 {
		t.Errorf("Do = %v, calls %d, waits %v; want nil, 1, none", err, *calls, clock.Waits())
	}
}
