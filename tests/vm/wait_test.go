//go:build vmlab

package vm

import (
	"fmt"
	"time"
)

// Bounds of the lab's waits. Generous: QEMU runs under TCG on a shared CPU,
// and the same step varies 2-4x with the host's load (docs/vmlab.md).
const (
	bootBound    = 600 * time.Second
	unitBound    = 400 * time.Second
	commandBound = 120 * time.Second
	powerBound   = 180 * time.Second
)

// waitFor polls check until it reports done, with a growing interval, for at
// most bound. On timeout the error names what was waited for and the last
// state check described. No fixed sleeps anywhere in the lab: every wait is
// this.
func waitFor(what string, bound time.Duration, check func() (done bool, state string)) error {
	start := time.Now()
	last := ""
	for delay := 200 * time.Millisecond; ; delay = min(delay*3/2, 3*time.Second) {
		done, state := check()
		if done {
			return nil
		}
		last = state
		if time.Since(start) > bound {
			return fmt.Errorf("gave up after %s waiting for %s; last seen: %s", bound, what, last)
		}
		time.Sleep(delay)
	}
}
