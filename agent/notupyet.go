package agent

import (
	"errors"
	"syscall"
	"time"
)

// notUpYetRetry is the wait after an attempt that failed inside the node
// because its own network is not up yet: no route to the server (the
// address NetworkManager brings up from /oem, a bond or a lease is not
// there yet) or no usable source address. Such an attempt never reached
// the server, so the backoff that protects a server from a fleet does not
// apply. A short fixed wait lets the agent register within about a second
// of the address appearing, rather than up to a whole doubled backoff step
// later (docs/boot-timeline.md, "No wait for a DHCP that cannot come": the
// agent starts with NetworkManager and waits for its network itself).
const notUpYetRetry = time.Second

// notUpYet marks such an error for retry.Policy: its RetryAfter replaces
// the backoff curve; errors.Is and errors.As still reach the cause.
type notUpYet struct{ error }

func (e notUpYet) Unwrap() error           { return e.error }
func (notUpYet) RetryAfter() time.Duration { return notUpYetRetry }

// markNotUpYet wraps err when it is a local failure of that kind.
func markNotUpYet(err error) error {
	if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EADDRNOTAVAIL) {
		return notUpYet{err}
	}
	return err
}
