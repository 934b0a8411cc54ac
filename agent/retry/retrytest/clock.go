// Package retrytest provides a fake clock for code that retries through
// agent/retry, so tests run every backoff path without sleeping.
package retrytest

import (
	"sync"
	"time"
)

// Clock is a fake retry.Clock whose After fires at once and moves the clock
// forward by the requested duration, recording it. Time moves only through
// After and Advance, so a test sees exactly the waits the code asked for.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

// NewClock returns a Clock that starts at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After records d, advances the clock by d and returns a channel that
// already holds the new time.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// Advance moves the clock forward, as if an operation took d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Waits returns a copy of every duration passed to After, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}
