package bootstrap

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

	"github.com/nodereg/nodereg/internal/host"

	"github.com/nodereg/nodereg/internal/errclass"
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
	heldFile     = host.BootstrapHeld
	// maxHeldFile bounds the file: 65,536 entries of about 60 bytes.
	maxHeldFile = 8 << 20
)

// extend pushes systemd's start timeout past a wait of d.
func (e *Env) extendPast(d time.Duration) { e.extend(d + extendMargin) }

// probeMaxDuration is the longest one ARP probe takes with p's timing: the
// random start delay, the spacing between the probes, the listen after the
// last.
func probeMaxDuration(p *ARPProber) time.Duration {
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
	real     Prober
	perProbe time.Duration
	extend   func(time.Duration)
	earlier  map[netip.Addr]net.HardwareAddr
	held     []heldAddress // found held by this run
	probed   int
	skipped  int
	last     netip.Addr
	iface    string
}

func (w *walkingProber) Probe(ctx context.Context, iface string, addr netip.Addr) (ProbeResult, error) {
	if holder, ok := w.earlier[addr]; ok {
		w.skipped++
		return ProbeResult{Taken: true, Holder: holder}, nil
	}
	if err := ctx.Err(); err != nil {
		return ProbeResult{}, err
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

// DeadlineError says the run's --deadline ran out while choosing
// the bootstrap address: try again later (exit 75), from where this run
// stopped.
type DeadlineError struct {
	Deadline time.Duration
	Probed   int        // addresses probed by this run
	Skipped  int        // addresses an earlier run found held, not probed again
	Held     int        // addresses known held now, for the next run
	Last     netip.Addr // the last address probed; invalid when none
	Iface    string
}

// Class: try again later (exit 75); the next run walks on from where this
// one stopped.
func (e *DeadlineError) Class() errclass.Class { return errclass.Transient }

func (e *DeadlineError) Error() string {
	last := "none"
	if e.Last.IsValid() {
		last = e.Last.String() + " on " + e.Iface
	}
	return fmt.Sprintf("bootstrap network: --deadline %s ran out choosing an address: %d probed by this run (last %s), %d known held from an earlier run skipped; the next run skips the %d known held and walks on",
		e.Deadline, e.Probed, last, e.Skipped, e.Held)
}

// readHeld reads what an earlier run of this boot found held; a missing or
// unreadable file is an empty memory (it only saves probes).
func readHeld(env *Env) map[netip.Addr]net.HardwareAddr {
	out := map[netip.Addr]net.HardwareAddr{}
	b, err := env.Files.ReadFile(heldFile, maxHeldFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			env.log().WithError(err).Warn("bootstrap walk memory unreadable: probing every address")
		}
		return out
	}
	var held []heldAddress
	if err := json.Unmarshal(b, &held); err != nil {
		env.log().WithError(err).Warn("bootstrap walk memory unreadable: probing every address")
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
func saveHeld(env *Env, earlier map[netip.Addr]net.HardwareAddr, found []heldAddress) (int, error) {
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
	if err := env.Files.MkdirAll(path.Dir(heldFile), 0o700); err != nil {
		return 0, err
	}
	return len(list), env.Files.WriteFile(heldFile, b, 0o600)
}

// forgetHeld removes the walk memory: the choice is over.
func forgetHeld(env *Env) {
	if err := env.Files.Remove(heldFile); err != nil {
		env.log().WithError(err).Warn("removing the bootstrap walk memory")
	}
}

// boundedChoice runs choose under the run's --deadline with w as its
// prober, and turns a deadline that ran out into *DeadlineError,
// keeping what the walk learnt.
func boundedChoice(ctx context.Context, env *Env, w *walkingProber, choose func(context.Context) (*Plan, error)) (*Plan, error) {
	cctx := ctx
	if env.Deadline > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, env.Deadline)
		defer cancel()
	}
	plan, err := choose(cctx)
	var exhausted *ExhaustedError
	switch {
	case err == nil, errors.As(err, &exhausted):
		forgetHeld(env)
		return plan, err
	case ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		de := &DeadlineError{Deadline: env.Deadline, Probed: w.probed, Skipped: w.skipped, Last: w.last, Iface: w.iface}
		n, serr := saveHeld(env, w.earlier, w.held)
		if serr != nil {
			env.log().WithError(serr).Warn("keeping the bootstrap walk for the next run")
		}
		de.Held = n
		return nil, de
	}
	return nil, err
}

// chooseUp reads the machine's facts, raises the probe interfaces and picks
// the addresses with real duplicate address detection, under the run's
// --deadline and extending systemd's start timeout before each wait.
func chooseUp(ctx context.Context, c *Config, env Env) (*Plan, error) {
	log := env.log()
	facts, err := ReadFacts(env.Files)
	if err != nil {
		return nil, err
	}
	preview, err := Preview(c, facts)
	if err != nil {
		return nil, explain(env.Files, err)
	}
	prober := env.Prober
	perProbe := time.Duration(0)
	if prober == nil {
		arp, err := probeTiming(env.ProbeInterval)
		if err != nil {
			return nil, err
		}
		prober, perProbe = arp, probeMaxDuration(arp)
	}
	w := &walkingProber{real: prober, perProbe: perProbe, extend: env.extendPast, earlier: readHeld(&env)}
	if len(w.earlier) > 0 {
		log.WithField("known-held", len(w.earlier)).Info("an earlier run ran out of time walking the range: its held addresses are not probed again")
	}
	return boundedChoice(ctx, &env, w, func(ctx context.Context) (*Plan, error) {
		for _, ch := range preview.Choices {
			if ch.Interface == "" {
				continue
			}
			env.extendPast(linkReadyTimeout)
			lctx, cancel := context.WithTimeout(ctx, linkReadyTimeout)
			raised, err := env.linkReady(lctx, ch.Interface)
			cancel()
			if err != nil {
				return nil, err
			}
			if raised {
				log.WithField("interface", ch.Interface).Info("link was down: set it up to probe")
			}
		}
		return Choose(ctx, c, facts, w)
	})
}

// probeTiming is the ARP prober, RFC 5227's timing unless the interval is
// set (NODEREG_BOOTSTRAP_PROBE_INTERVAL, e.g. 200ms): still three probes and
// a listen after the last, on a shorter clock.
func probeTiming(interval string) (*ARPProber, error) {
	if interval == "" {
		// RFC 5227's constants, spelled out so the start timeout can be
		// extended by a probe's maximum.
		return &ARPProber{ProbeWait: time.Second, ProbeNum: 3, ProbeMin: time.Second, ProbeMax: 2 * time.Second, AnnounceWait: 2 * time.Second}, nil
	}
	d, err := time.ParseDuration(interval)
	if err != nil || d <= 0 || d > 10*time.Second {
		return nil, &EnvError{Var: ProbeIntervalEnv, Value: interval, Want: "a duration between 0 and 10s"}
	}
	return &ARPProber{ProbeWait: d, ProbeNum: 3, ProbeMin: d, ProbeMax: d, AnnounceWait: 2 * d}, nil
}

// EnvError is an environment variable of the agent's with a value it
// cannot use: a configuration error (exit 78).
type EnvError struct{ Var, Value, Want string }

// Class: the admin's bootstrap table must change (docs/bootstrap.md).
func (e *EnvError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *EnvError) Cause() string { return "bootstrap network config" }

func (e *EnvError) Error() string { return fmt.Sprintf("%s=%q: want %s", e.Var, e.Value, e.Want) }
