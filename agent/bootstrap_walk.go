package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"path"
	"time"

	"github.com/nodereg/nodereg/bootstrap"
)

// The bootstrap choice under systemd (TimeoutStartSec=5min): a link wait of
// up to 30 s per interface, 4-7 s per probed address, a range of up to
// 65,536 addresses. Each wait first pushes the start timeout past its own
// maximum plus extendMargin (as the register phase's retries do), and the
// whole choice is bounded by the run's --deadline: when it runs out the run
// ends with exit 75 naming how far the walk got.
//
// Resumable: the range addresses found held by a run that ran out of time
// are kept in heldFile, and the next run (systemd's restart) takes them as
// held without probing, so it walks on from where the last one stopped
// instead of probing the same addresses for ever. The file lives under
// /run, so a reboot forgets it (addresses free up); a choice that succeeds
// or finds the range exhausted removes it, so the next walk probes every
// address again.
const (
	extendMargin = 5 * time.Second
	heldFile     = "/run/nodereg/bootstrap-held.json"
	// maxHeldFile bounds the file: 65,536 entries of about 60 bytes.
	maxHeldFile = 8 << 20
)

// extender is the part of the systemd notifier that pushes the start
// timeout (EXTEND_TIMEOUT_USEC); a notifier without it extends nothing.
type extender interface{ Extend(time.Duration) }

func (r *run) extend(d time.Duration) {
	if e, ok := r.notify.(extender); ok {
		e.Extend(d + extendMargin)
	}
}

// probeMaxDuration is the longest one ARP probe takes with p's timing: the
// random start delay, the spacing between the probes, the listen after the
// last.
func probeMaxDuration(p *bootstrap.ARPProber) time.Duration {
	return p.ProbeWait + time.Duration(max(p.ProbeNum-1, 0))*p.ProbeMax + p.AnnounceWait
}

// heldAddress is one address found held, and by whom.
type heldAddress struct {
	Address netip.Addr `json:"address"`
	Holder  string     `json:"holder"`
}

// walkingProber is the prober of one bootstrap choice: it extends the start
// timeout before each probe, answers "held" for the addresses an earlier
// run of this boot found held, and keeps count for the deadline's message.
type walkingProber struct {
	real     bootstrap.Prober
	perProbe time.Duration
	extend   func(time.Duration)
	earlier  map[netip.Addr]net.HardwareAddr
	held     []heldAddress // found held by this run
	probed   int
	skipped  int
	last     netip.Addr
	iface    string
}

func (w *walkingProber) Probe(ctx context.Context, iface string, addr netip.Addr) (bootstrap.ProbeResult, error) {
	if holder, ok := w.earlier[addr]; ok {
		w.skipped++
		return bootstrap.ProbeResult{Taken: true, Holder: holder}, nil
	}
	if err := ctx.Err(); err != nil {
		return bootstrap.ProbeResult{}, err
	}
	w.extend(w.perProbe)
	res, err := w.real.Probe(ctx, iface, addr)
	if err != nil {
		return res, err
	}
	w.probed++
	w.last, w.iface = addr, iface
	if res.Taken {
		w.held = append(w.held, heldAddress{Address: addr, Holder: res.Holder.String()})
	}
	return res, nil
}

// BootstrapDeadlineError says the run's --deadline ran out while choosing
// the bootstrap address: try again later (exit 75), from where this run
// stopped.
type BootstrapDeadlineError struct {
	Deadline time.Duration
	Probed   int        // addresses probed by this run
	Skipped  int        // addresses an earlier run found held, not probed again
	Held     int        // addresses known held now, for the next run
	Last     netip.Addr // the last address probed; invalid when none
	Iface    string
}

func (e *BootstrapDeadlineError) Error() string {
	last := "none"
	if e.Last.IsValid() {
		last = e.Last.String() + " on " + e.Iface
	}
	return fmt.Sprintf("bootstrap network: --deadline %s ran out choosing an address: %d probed by this run (last %s), %d known held from an earlier run skipped; the next run skips the %d known held and walks on",
		e.Deadline, e.Probed, last, e.Skipped, e.Held)
}

// readHeld reads what an earlier run of this boot found held; a missing or
// unreadable file is an empty memory (it only saves probes).
func (r *run) readHeld() map[netip.Addr]net.HardwareAddr {
	out := map[netip.Addr]net.HardwareAddr{}
	b, err := r.files.ReadFile(heldFile, maxHeldFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.WithField("phase", PhaseBootstrap).WithError(err).Warn("bootstrap walk memory unreadable: probing every address")
		}
		return out
	}
	var held []heldAddress
	if err := json.Unmarshal(b, &held); err != nil {
		r.log.WithField("phase", PhaseBootstrap).WithError(err).Warn("bootstrap walk memory unreadable: probing every address")
		return out
	}
	for _, h := range held {
		mac, err := net.ParseMAC(h.Holder)
		if h.Address.IsValid() && err == nil {
			out[h.Address] = mac
		}
	}
	return out
}

// saveHeld keeps the addresses known held for the next run.
func (r *run) saveHeld(earlier map[netip.Addr]net.HardwareAddr, found []heldAddress) (int, error) {
	all := map[netip.Addr]string{}
	for a, m := range earlier {
		all[a] = m.String()
	}
	for _, h := range found {
		all[h.Address] = h.Holder
	}
	list := make([]heldAddress, 0, len(all))
	for a, m := range all {
		list = append(list, heldAddress{Address: a, Holder: m})
	}
	b, err := json.Marshal(list)
	if err != nil {
		return 0, err
	}
	if err := r.files.MkdirAll(path.Dir(heldFile), 0o700); err != nil {
		return 0, err
	}
	return len(list), r.files.WriteFile(heldFile, b, 0o600)
}

// forgetHeld removes the walk memory: the choice is over.
func (r *run) forgetHeld() {
	if err := r.files.Remove(heldFile); err != nil {
		r.log.WithField("phase", PhaseBootstrap).WithError(err).Warn("removing the bootstrap walk memory")
	}
}

// boundedChoice runs choose under the run's --deadline with w as its
// prober, and turns a deadline that ran out into *BootstrapDeadlineError,
// keeping what the walk learnt.
func (r *run) boundedChoice(ctx context.Context, w *walkingProber, choose func(context.Context) (*bootstrap.Plan, error)) (*bootstrap.Plan, error) {
	cctx := ctx
	if r.o.Deadline > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, r.o.Deadline)
		defer cancel()
	}
	plan, err := choose(cctx)
	var exhausted *bootstrap.ExhaustedError
	switch {
	case err == nil, errors.As(err, &exhausted):
		r.forgetHeld()
		return plan, err
	case ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		de := &BootstrapDeadlineError{Deadline: r.o.Deadline, Probed: w.probed, Skipped: w.skipped, Last: w.last, Iface: w.iface}
		n, serr := r.saveHeld(w.earlier, w.held)
		if serr != nil {
			r.log.WithField("phase", PhaseBootstrap).WithError(serr).Warn("keeping the bootstrap walk for the next run")
		}
		de.Held = n
		return nil, de
	}
	return nil, err
}
