package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/protocol"
)

// stormDeadline is the agent's --deadline default: a machine that has not
// registered by then gives up (exit 75), which the storm counts as a
// failure.
const stormDeadline = 10 * time.Minute

// stormMode is where the simulated machines connect from, and the
// fraction of their first registrations regserver refuses with
// elemental-operator's Kubernetes conflict (--fault-update-conflict).
type stormMode struct {
	name     string
	shared   bool
	conflict float64
}

var stormModes = []stormMode{{"own addresses", false, 0}, {"one NAT address", true, 0}}

// conflictStorm (docs/performance.md, "A storm with Kubernetes conflicts"): 5 % of the machines' first updates
// refused with the conflict the real operator sent, which the agent must
// retry (no machine may end at 78).
var conflictStorm = stormMode{"own addresses, 5 % of first updates refused with a Kubernetes conflict", false, 0.05}

// stormAddr is machine i's source address: 127.20.0.0/16 upwards, one a
// machine, or 127.30.0.1 for all of them behind the NAT.
func stormAddr(i int, shared bool) netip.Addr {
	if shared {
		return netip.AddrFrom4([4]byte{127, 30, 0, 1})
	}
	return netip.AddrFrom4([4]byte{127, byte(20 + i/62500), byte(i/250%250 + 1), byte(i%250 + 1)})
}

// attempt is one registration conversation of a storm machine.
type attempt struct {
	at   time.Duration // since the storm began
	kind string        // "ok", or what refused it
}

// stormMachine is one simulated node: when it powered on, its attempts,
// the waits the retry policy chose, and when it registered.
type stormMachine struct {
	on       time.Duration
	attempts []attempt
	waits    []time.Duration
	done     time.Duration
	err      error
}

// stormResult is one storm: the machines and the server's VmHWM.
type stormResult struct {
	machines []*stormMachine
	rss      float64
	rssErr   error
}

// storm powers n new machines on within one second against a fresh
// regserver with its default limits, each registering through the
// protocol client and the agent's retry policy and classification.
func (b *bencher) storm(p *protocol.Payloads, n int, mode stormMode, ids *atomic.Int64) (*stormResult, error) {
	b.nextM++
	var extra []string
	if mode.conflict > 0 {
		extra = []string{"--fault-update-conflict", fmt.Sprint(mode.conflict)}
	}
	rs, err := startRegserver(b.bins["regserver"], fmt.Sprintf("%s/storm-%d", b.work, b.nextM), extra...)
	if err != nil {
		return nil, err
	}
	defer rs.stop()
	if err := checkLoopbackSource(rs.base, stormAddr(n-1, mode.shared)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), stormDeadline+time.Minute)
	defer cancel()
	res := &stormResult{machines: make([]*stormMachine, n)}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		m := &stormMachine{on: time.Duration(rand.Int64N(int64(time.Second)))}
		res.machines[i] = m
		id := ids.Add(1)
		o := protocol.DialOptions{URL: rs.url(), SessionDeadline: protocol.DefaultSessionDeadline,
			HandshakeTimeout: protocol.DefaultSessionDeadline,
			LocalAddr:        &net.TCPAddr{IP: stormAddr(i, mode.shared).AsSlice()}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.run(ctx, t0, o, machinePayloads(p, id), macOf(id))
		}()
	}
	wg.Wait()
	res.rss, res.rssErr = rs.peakRSS()
	return res, nil
}

// run is the machine's boot: wait for its power-on moment, then register
// as the agent does, bounded by the agent's deadline.
func (m *stormMachine) run(ctx context.Context, t0 time.Time, o protocol.DialOptions, p *protocol.Payloads, mac string) {
	time.Sleep(time.Until(t0.Add(m.on)))
	policy := agent.RetryPolicy(stormDeadline, nil)
	policy.OnWait = func(_ int, d time.Duration, _ error) { m.waits = append(m.waits, d) }
	ctx, cancel := context.WithTimeout(ctx, stormDeadline)
	defer cancel()
	m.err = policy.Do(ctx, "registration", func(ctx context.Context, _ int) error {
		at := time.Since(t0)
		err := registerWith(ctx, o, p, mac)
		m.attempts = append(m.attempts, attempt{at: at, kind: refusalKind(err)})
		if err != nil {
			return agent.ClassifyRegister(err)
		}
		return nil
	})
	m.done = time.Since(t0)
}

// refusalKind names what ended an attempt, for the storm's note.
func refusalKind(err error) string {
	var er *protocol.ErrorReply
	var he *protocol.HandshakeError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &er) && er.Reason == "" && strings.Contains(er.Message, "Operation cannot be fulfilled"):
		return "Kubernetes conflict"
	case errors.As(err, &er):
		return er.Reason
	case errors.As(err, &he):
		return fmt.Sprintf("HTTP %d", he.StatusCode)
	}
	msg := err.Error()
	for _, k := range []struct{ kind, text string }{
		{"no source port", "address already in use"}, {"no source port", "cannot assign requested address"},
		{"timeout", "timeout"}, {"timeout", "deadline exceeded"}, {"reset", "connection reset"},
		{"refused", "connection refused"}, {"EOF", "EOF"}, {"broken pipe", "broken pipe"},
	} {
		if strings.Contains(msg, k.text) {
			return k.kind
		}
	}
	return "other: " + msg
}

// checkLoopbackSource dials the server once from src, so a kernel that
// refuses the address fails the storm with its reason, not N times.
func checkLoopbackSource(base string, src netip.Addr) error {
	host := strings.TrimPrefix(base, "http://")
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src.AsSlice()}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", host)
	if err != nil {
		return fmt.Errorf("storm: connecting from %s (a loopback address of 127.0.0.0/8): %w", src, err)
	}
	return c.Close()
}

func macOf(id int64) string {
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", (id>>24)&0xff, (id>>16)&0xff, (id>>8)&0xff, id&0xff)
}
