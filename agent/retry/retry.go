// Package retry runs an operation again after retryable failures, with
// capped, jittered exponential backoff, an overall deadline and a hook that
// tells terminal failures from transient ones.
//
// It is a leaf (the standard library only): what is worth another attempt
// is the caller's to say, in one place (Policy.Retryable; the agent passes
// exitcode.Retryable, its one decision, by the error's class).
//
// The agent retries inside its own process rather than exiting and letting
// systemd restart it: it keeps its TPM session and state, can tell systemd what
// it waits for (OnWait sends STATUS and EXTEND_TIMEOUT_USEC), and honours the
// server's hint of when to ask again. Restart=on-failure in the unit is only
// the backstop for a crash or an exhausted deadline.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults used when the matching Policy field is zero.
const (
	DefaultInitial       = time.Second
	DefaultMax           = time.Minute
	DefaultMultiplier    = 2.0
	DefaultJitter        = 0.2
	DefaultMaxRetryAfter = 10 * time.Minute
)

// ErrDeadline is wrapped into the error returned when the policy's deadline
// ends the retries; the last failure of the operation is wrapped next to it.
// It is a retryable outcome for the process as a whole (exit 75: a later run
// may succeed), unlike a terminal failure.
var ErrDeadline = errors.New("retry deadline exceeded")

// ErrAttempts is wrapped into the error returned when MaxAttempts is used up.
var ErrAttempts = errors.New("retry attempts exhausted")

// Clock is the time source of a Policy. Tests inject a fake one so no test
// sleeps; production uses SystemClock.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// SystemClock is the real wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RetryAfterer is implemented by errors that carry a server's hint of when
// to try again (for example a MsgError with retryAfterSeconds). Do finds it
// anywhere in the error chain with errors.As.
type RetryAfterer interface {
	RetryAfter() time.Duration
}

// Classifier reports whether err is worth another attempt. An error it
// refuses (bad config, inventory deleted on the server, pool exhausted)
// ends Do at once so the process can exit without a retry storm.
type Classifier func(err error) (retryable bool)

// Policy describes how Do retries. The zero value is usable: defaults apply
// to zero fields, there is no deadline and no attempt limit (only ctx stops
// it), and every error is retried.
type Policy struct {
	// Initial is the delay after the first failure.
	Initial time.Duration
	// Max caps every computed delay, jitter included.
	Max time.Duration
	// Multiplier grows the delay after each failure (>= 1).
	Multiplier float64
	// Jitter spreads each delay uniformly over [d*(1-Jitter), d*(1+Jitter)],
	// both bounds capped at Max, so a fleet that booted together does not hit the
	// server in lockstep. Between 0 and 1; negative disables jitter.
	Jitter float64
	// Deadline bounds the whole retry loop, measured on Clock from the
	// start of Do. No attempt starts after it; a wait that would cross it is
	// shortened so the last attempt runs right at the deadline. 0: none.
	Deadline time.Duration
	// MaxAttempts bounds the number of attempts. 0: unlimited.
	MaxAttempts int
	// MaxRetryAfter caps a server's retry-after hint, so a confused or
	// hostile server cannot park the agent for hours.
	MaxRetryAfter time.Duration

	// Clock defaults to SystemClock.
	Clock Clock
	// Rand returns a number in [0, 1) for jitter; defaults to math/rand/v2.
	Rand func() float64
	// Retryable classifies failures; nil retries every one. The agent
	// passes exitcode.Retryable: what an error's class calls "needs a
	// person" (bad CA, unknown registration, refused certificate) or "not
	// in this process" is never retried.
	Retryable Classifier
	// OnWait is called before each wait with the attempt that just failed
	// (1-based), the delay about to be waited and that attempt's error.
	OnWait func(attempt int, delay time.Duration, err error)
}

// Delay returns the backoff after the given failed attempt (1-based) before
// any retry-after hint, for a jitter sample r in [0, 1).
func (p Policy) Delay(attempt int, r float64) time.Duration {
	initial, maxDelay, mult, jitter := p.params()
	if attempt < 1 {
		attempt = 1
	}
	base := float64(initial) * math.Pow(mult, float64(attempt-1))
	// Spread uniformly between the jitter bounds, both clipped to Max: once
	// the curve reaches the cap, delays still differ across the fleet
	// instead of piling up on Max itself.
	lo := math.Min(base, float64(maxDelay)) * (1 - jitter)
	hi := math.Min(base*(1+jitter), float64(maxDelay))
	return time.Duration(lo + (hi-lo)*r)
}

func (p Policy) params() (initial, maxDelay time.Duration, mult, jitter float64) {
	initial, maxDelay, mult, jitter = p.Initial, p.Max, p.Multiplier, p.Jitter
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMax
	}
	if maxDelay < initial {
		maxDelay = initial
	}
	if mult < 1 {
		mult = DefaultMultiplier
	}
	switch {
	case jitter == 0:
		jitter = DefaultJitter
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	return initial, maxDelay, mult, jitter
}

// delay is the wait after the given failed attempt: the backoff curve, or
// the server's retry-after hint (capped at maxHint) when err carries one.
func (p Policy) delay(attempt int, r float64, err error, maxHint time.Duration) time.Duration {
	var hinted RetryAfterer
	if errors.As(err, &hinted) {
		// The server knows when its address claims will be ready better
		// than our curve does: wait what it asks, not less.
		if h := hinted.RetryAfter(); h > 0 {
			return min(h, maxHint)
		}
	}
	return p.Delay(attempt, r)
}

// Do calls op until it succeeds, fails terminally, the deadline or the
// attempt limit is reached, or ctx is done. what names the operation in the
// returned error. op gets the 1-based attempt number.
//
// A failure Retryable refuses is returned wrapped with the attempt count; errors.Is
// and errors.As reach the original. When the deadline or the attempt limit
// ends the loop, the error wraps ErrDeadline or ErrAttempts and the last
// failure. When ctx ends a wait, it wraps ctx.Err() and the last failure.
func (p Policy) Do(ctx context.Context, what string, op func(ctx context.Context, attempt int) error) error {
	_, err := Value(ctx, p, what, func(ctx context.Context, attempt int) (struct{}, error) { return struct{}{}, op(ctx, attempt) })
	return err
}

// Value is Do for an operation that produces something: it returns what
// the attempt that succeeded returned, so that no attempt has to hand its
// result out through a variable the caller shares with every attempt.
func Value[T any](ctx context.Context, p Policy, what string, op func(ctx context.Context, attempt int) (T, error)) (T, error) {
	var zero T
	clock := p.Clock
	if clock == nil {
		clock = SystemClock{}
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	retryable := p.Retryable
	if retryable == nil {
		retryable = func(error) bool { return true }
	}
	maxHint := p.MaxRetryAfter
	if maxHint <= 0 {
		maxHint = DefaultMaxRetryAfter
	}

	start := clock.Now()
	var deadline time.Time
	if p.Deadline > 0 {
		deadline = start.Add(p.Deadline)
	}

	// prev is the failure of the attempt before: a hard deadline cuts the
	// attempt in flight, whose error (a dial timeout) then says less than
	// the one before it (say, a pending address claim).
	var last, prev error
	cut := func(err error) error {
		if prev == nil || errors.Is(err, prev) {
			return err
		}
		return fmt.Errorf("%w (attempt before: %w)", err, prev)
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			if last != nil {
				// The wait and a hard deadline can end together: the
				// reason is the last failure, not the clock.
				return zero, fmt.Errorf("%s: stopped before attempt %d: %w (last failure: %w)", what, attempt, err, last)
			}
			return zero, fmt.Errorf("%s: stopped before attempt %d: %w", what, attempt, err)
		}
		v, err := op(ctx, attempt)
		prev, last = last, err
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			return zero, fmt.Errorf("%s: attempt %d: %w", what, attempt, cut(err))
		}
		if !retryable(err) {
			return zero, fmt.Errorf("%s: attempt %d failed, not retrying: %w", what, attempt, err)
		}
		if p.MaxAttempts > 0 && attempt >= p.MaxAttempts {
			return zero, fmt.Errorf("%s: giving up after %d attempts: %w: %w", what, attempt, ErrAttempts, err)
		}

		delay := p.delay(attempt, rnd(), err, maxHint)
		if !deadline.IsZero() {
			left := deadline.Sub(clock.Now())
			if left <= 0 {
				return zero, fmt.Errorf("%s: giving up after %d attempts in %s: %w: %w",
					what, attempt, clock.Now().Sub(start).Round(time.Millisecond), ErrDeadline, cut(err))
			}
			delay = min(delay, left)
		}

		if p.OnWait != nil {
			p.OnWait(attempt, delay, err)
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("%s: waiting after attempt %d: %w (last failure: %w)", what, attempt, ctx.Err(), err)
		case <-clock.After(delay):
		}
	}
}
