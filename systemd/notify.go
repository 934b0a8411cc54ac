// Package systemd holds nodereg's unit files (installed by install.mk) and
// the sd_notify helper the agent uses to tell systemd what it is doing.
//
// The boot unit is Type=notify so that `systemctl status nodereg` shows the
// phase the agent is in and what it waits for, units ordered after it start
// only once the network config is applied, and a long wait for addresses can
// extend the start timeout instead of being killed by it.
package systemd

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
)

// Notifier sends sd_notify messages. Outside systemd (NOTIFY_SOCKET unset) it
// does nothing, so the agent calls it unconditionally. A failed send is
// logged, never returned: telling systemd is a courtesy, not part of the run.
// The zero value is usable and logs nothing; methods are safe for concurrent
// use and on a nil *Notifier.
type Notifier struct {
	log *logrus.Entry

	mu     sync.Mutex
	status string
	warned bool
	wg     sync.WaitGroup
}

// New returns a Notifier that logs through log (nil: no logging).
func New(log *logrus.Entry) *Notifier {
	return &Notifier{log: log}
}

// Status sets the text `systemctl status` shows: "<phase>: <detail>", or
// just the phase when detail is empty. Newlines are flattened because the
// protocol separates assignments with them.
func (n *Notifier) Status(phase, detail string) {
	if n == nil {
		return
	}
	s := phase
	if detail != "" {
		s += ": " + detail
	}
	s = strings.ReplaceAll(s, "\n", " ")
	n.mu.Lock()
	n.status = s
	n.mu.Unlock()
	n.send("STATUS=" + s)
}

// Extend asks systemd for d more time before the start timeout fires
// (EXTEND_TIMEOUT_USEC, systemd >= 236). Call it before each wait, with the
// wait plus a margin for the next attempt: the extension counts from now.
func (n *Notifier) Extend(d time.Duration) {
	if n == nil || d <= 0 {
		return
	}
	n.send(fmt.Sprintf("EXTEND_TIMEOUT_USEC=%d", d.Microseconds()))
}

// Ready reports that start-up is complete. The last status is sent again in
// the same datagram with a "ready" prefix, so the line systemctl keeps
// showing after the agent exits says how the run ended.
func (n *Notifier) Ready() {
	if n == nil {
		return
	}
	n.mu.Lock()
	s := "ready"
	if n.status != "" {
		s += " (" + n.status + ")"
	}
	n.status = s
	n.mu.Unlock()
	n.send(daemon.SdNotifyReady + "\nSTATUS=" + s)
}

// RetryHook returns a callback for retry.Policy.OnWait: before each wait it
// pushes the start timeout past the wait plus margin (the time the next
// attempt may take) and shows in STATUS what failed and when the next try
// is, e.g. "network: attempt 3: WaitingForIPAddress: ...; next try in 45s".
func (n *Notifier) RetryHook(phase string, margin time.Duration) func(attempt int, delay time.Duration, err error) {
	return func(attempt int, delay time.Duration, err error) {
		n.Extend(delay + margin)
		n.Status(phase, fmt.Sprintf("attempt %d: %v; next try in %s", attempt, err, delay.Round(time.Second)))
	}
}

// StartWatchdog pings the systemd watchdog (WATCHDOG=1) at half the
// interval of WatchdogSec= until ctx is done. It does nothing when the unit
// has no watchdog or the watchdog belongs to another process. The first
// ping is sent before it returns.
func (n *Notifier) StartWatchdog(ctx context.Context) {
	if n == nil {
		return
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.warn("reading the systemd watchdog settings", err)
		return
	}
	if interval <= 0 {
		return
	}
	n.debug(fmt.Sprintf("watchdog enabled, pinging every %s", interval/2))
	n.send(daemon.SdNotifyWatchdog)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(interval / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.send(daemon.SdNotifyWatchdog)
			}
		}
	}()
}

// send keeps NOTIFY_SOCKET in the environment (unsetEnvironment=false):
// the watchdog and later phases need it; children cannot use it anyway
// because the units leave NotifyAccess at "main".
func (n *Notifier) send(state string) {
	sent, err := daemon.SdNotify(false, state)
	if err != nil {
		n.warn("sending "+strings.SplitN(state, "=", 2)[0]+" to systemd", err)
		return
	}
	if sent {
		n.debug("sd_notify " + strings.ReplaceAll(state, "\n", " "))
	}
}

func (n *Notifier) warn(what string, err error) {
	n.mu.Lock()
	first := !n.warned
	n.warned = true
	n.mu.Unlock()
	// Once is enough: a broken socket stays broken, and repeating the
	// warning at every watchdog ping would flood the journal.
	if first && n.log != nil {
		n.log.WithError(err).Warnf("systemd notify: %s", what)
	}
}

func (n *Notifier) debug(msg string) {
	if n.log != nil {
		n.log.Debug(msg)
	}
}
