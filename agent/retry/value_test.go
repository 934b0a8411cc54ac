package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
)

// Value hands back what the attempt that succeeded returned, and the zero
// value with the error when none does: the caller needs no variable the
// attempts write into.
func TestValueReturnsTheSucceedingAttempts(t *testing.T) {
	clock := retrytest.NewClock(epoch)
	p := retry.Policy{Clock: clock, MaxAttempts: 5}
	got, err := retry.Value(t.Context(), p, "x", func(_ context.Context, attempt int) (int, error) {
		if attempt < 3 {
			return attempt * 100, errFlaky // what a failed attempt returns is dropped
		}
		return attempt, nil
	})
	if err != nil || got != 3 {
		t.Errorf("Value = %d, %v; want the third attempt's 3", got, err)
	}
	p.Retryable = func(error) bool { return false }
	got, err = retry.Value(t.Context(), p, "x", func(context.Context, int) (int, error) { return 7, errGone })
	if !errors.Is(err, errGone) || got != 0 {
		t.Errorf("Value = %d, %v; want 0 and the attempt's error", got, err)
	}
}
