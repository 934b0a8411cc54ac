package server

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// Per-client limits (docs/regserver.md, Limits): what one client address
// can make the server hold. Anybody with the registration URL can act as
// any number of machines, so the limits are per address, with a bound on
// the whole server for inventories that hold no address.
const (
	// DefaultMaxClientSessions bounds registration sessions in flight
	// from one client address: half of DefaultMaxSessions, so one address
	// (a whole fleet behind one NAT, or one flooding client) can never
	// hold every slot, while the fleet still gets dozens at a time.
	DefaultMaxClientSessions = DefaultMaxSessions / 2
	// DefaultNewInventoriesPerMinute bounds new inventories one client
	// address creates on one registration per minute (a token bucket of
	// that size, refilled over the minute): a rack of 1,000 new machines
	// behind one NAT registers at once, 5,000 within about five minutes,
	// inside the agent's 10-minute deadline; one client minting machines
	// grows the store by at most about 16 MB a minute.
	DefaultNewInventoriesPerMinute = 1000
	// DefaultMaxPendingInventories bounds inventories waiting for an
	// address, server wide: past it, a new machine that would wait is
	// refused (existing ones still re-register).
	DefaultMaxPendingInventories = 1024
)

// Reasons of the MsgErrors these limits answer with; the message names
// the client, the limit and when to try again.
const (
	ReasonRateLimited    = protocol.ReasonRateLimited
	ReasonTooManyPending = protocol.ReasonTooManyPending
)

// maxBuckets bounds the rate limiter's memory; full buckets (idle clients)
// are dropped first.
const maxBuckets = 1 << 14

type bucketKey struct {
	client       netip.Addr
	registration string
}

type bucket struct {
	tokens float64
	at     time.Time
}

// clientLimits holds the per-address counters.
type clientLimits struct {
	maxSessions int     // <= 0: none
	perMinute   float64 // <= 0: none
	maxPending  int     // <= 0: none

	mu       sync.Mutex
	sessions map[netip.Addr]int
	buckets  map[bucketKey]*bucket
}

func newClientLimits(o Options) *clientLimits {
	l := &clientLimits{maxSessions: o.MaxClientSessions, perMinute: float64(o.NewInventoriesPerMinute), maxPending: o.MaxPendingInventories,
		sessions: map[netip.Addr]int{}, buckets: map[bucketKey]*bucket{}}
	if l.maxSessions == 0 {
		l.maxSessions = DefaultMaxClientSessions
	}
	if l.perMinute == 0 {
		l.perMinute = DefaultNewInventoriesPerMinute
	}
	if l.maxPending == 0 {
		l.maxPending = DefaultMaxPendingInventories
	}
	return l
}

// clientAddr is the client a request came from, as the per-client limits
// key it: the connection's address, never a header a client could set
// (clientKey).
func clientAddr(remote string) netip.Addr {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, _ := netip.ParseAddr(host)
	return clientKey(a.Unmap())
}

// clientV6Prefix is the IPv6 prefix one client is taken to hold: a /64 is
// what a single host on a SLAAC link gets, so keying on the whole address
// would leave it 2^64 fresh allowances.
const clientV6Prefix = 64

// clientKey is a's per-client key: an IPv4 address as it is, an IPv6
// address cut to its /64 (docs/regserver.md, Limits).
func clientKey(a netip.Addr) netip.Addr {
	if !a.Is6() {
		return a
	}
	p, err := a.WithZone("").Prefix(clientV6Prefix)
	if err != nil {
		return a
	}
	return p.Addr()
}

// enter counts one more session from a; false when a has its share.
func (l *clientLimits) enter(a netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxSessions > 0 && l.sessions[a] >= l.maxSessions {
		return false
	}
	l.sessions[a]++
	return true
}

func (l *clientLimits) leave(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions[a] <= 1 {
		delete(l.sessions, a)
	} else {
		l.sessions[a]--
	}
}

// takeInventory spends one new inventory of a's allowance on a
// registration; when none is left it says how long until one is.
func (l *clientLimits) takeInventory(a netip.Addr, reg string, now time.Time) (time.Duration, bool) {
	if l.perMinute <= 0 {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := bucketKey{a, reg}
	b := l.buckets[k]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = &bucket{tokens: l.perMinute, at: now}
		l.buckets[k] = b
	}
	b.tokens = min(l.perMinute, b.tokens+now.Sub(b.at).Minutes()*l.perMinute)
	b.at = now
	if b.tokens < 1 {
		wait := time.Duration((1 - b.tokens) / l.perMinute * float64(time.Minute))
		return wait, false
	}
	b.tokens--
	return 0, true
}

// sweep drops buckets that have refilled (their clients were idle for a
// minute), and if none has, all of them: a flood of addresses must not
// grow memory without bound.
func (l *clientLimits) sweep(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Minutes()*l.perMinute >= l.perMinute {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		clear(l.buckets)
	}
}

// admitInventory decides whether client may create one more inventory on
// reg now: within its rate, and, when the new inventory would wait for an
// address, within the bound on waiting inventories. It records nothing in
// st.
func (srv *Server) admitInventory(st *store.State, reg *regconfig.Registration, client string, pools map[string]string, now time.Time) error {
	l := srv.limits
	if l.maxPending > 0 && st.PendingInventories() >= l.maxPending && srv.wouldWait(st, pools) {
		srv.log.WithField("client", client).Warnf("new inventory refused: %d inventories already wait for an address (--max-pending-inventories)", st.PendingInventories())
		return &protocol.ErrorReply{Reason: ReasonTooManyPending, RetryAfterSeconds: 60,
			Message: fmt.Sprintf("MachineInventory creation refused: %d inventories already wait for an address (limit %d); delete stale ones or enlarge the pool", st.PendingInventories(), l.maxPending)}
	}
	if wait, ok := l.takeInventory(clientAddr(client), reg.Name, now); !ok {
		secs := max(1, int(wait.Round(time.Second)/time.Second))
		srv.log.WithFields(map[string]any{"client": client, "registration": reg.Name}).Warn("new inventory refused: client over its rate (--new-inventories-per-minute)")
		return &protocol.ErrorReply{Reason: ReasonRateLimited, RetryAfterSeconds: secs,
			Message: fmt.Sprintf("MachineInventory creation refused: client %s created %.0f new inventories on registration %s within a minute (limit); try again in %ds", clientAddr(client), l.perMinute, reg.Name, secs)}
	}
	return nil
}
