package retry_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodereg/nodereg/agent/retry"
)

// The production clock (SystemClock: time.Now, time.After) in virtual
// time: the same schedule as the fake clock gives (TestDeadlineIsRespected),
// so what the agent waits in a real run is what the fake-clock tests pin,
// and no test sleeps for it.
func TestSystemClockScheduleInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var starts []time.Duration
		p := retry.Policy{Initial: time.Second, Max: time.Minute, Jitter: -1, Deadline: 10 * time.Second}
		err := p.Do(context.Background(), "registration", func(context.Context, int) error {
			starts = append(starts, time.Since(start))
			return errFlaky
		})
		if !errors.Is(err, retry.ErrDeadline) {
			t.Fatalf("err = %v, want the deadline", err)
		}
		if want := secs(0, 1, 3, 7, 10); !slices.Equal(starts, want) {
			t.Errorf("attempts started at %v, want %v", starts, want)
		}
	})
}

// A context that ends during a wait ends Do at that moment, not after the
// wait: the run's hard deadline cuts a backoff short.
func TestContextEndsAWaitInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		start := time.Now()
		p := retry.Policy{Initial: 2 * time.Second, Jitter: -1}
		err := p.Do(ctx, "registration", func(context.Context, int) error { return errFlaky })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFlaky) {
			t.Fatalf("err = %v, want the context's end and the last failure", err)
		}
		if took := time.Since(start); took != 2500*time.Millisecond {
			t.Errorf("Do returned after %s, want at the context's deadline, 2.5s", took)
		}
	})
}
