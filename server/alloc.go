package server

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/store"
)

// Allocation (docs/regserver.md, Addresses): a claim gets the lowest free
// address of its pool. The cost of one allocation does not depend on how
// many claims are waiting: each pool has a cursor below which every
// address is held (store.Cursor), and a registration only looks at its own
// claims. Claims that find their pool full wait in a queue per pool and are
// served first come, first served, in the transaction that frees an
// address.

// allocate tries to give c (a claim without an address) one now; it
// records the claim's reason when it cannot.
func (srv *Server) allocate(st *store.State, c *store.Claim, now time.Time) {
	pool := srv.cfg.Pools[c.Pool]
	switch {
	case pool == nil:
		srv.setReason(st, c, protocol.ReasonAllocationFailed, fmt.Sprintf("claim %s: pool %q is not declared", c.Name, c.Pool))
		return
	case now.Before(c.NotBefore):
		srv.setReason(st, c, protocol.ReasonWaitingForIPAddress, "Waiting to claim IPAddress "+c.Name)
		return
	}
	head := st.Waiting(c.Pool)
	if head != nil && head != c {
		// Older claims wait for this pool: first come, first served.
		srv.exhausted(st, c)
		return
	}
	a, ok := srv.take(st, c.Pool)
	if !ok {
		srv.exhausted(st, c)
		return
	}
	if head == c {
		st.Dequeue(c.Pool)
	}
	gw := ""
	if pool.Gateway.IsValid() {
		gw = pool.Gateway.String()
	}
	st.Assign(c, a, pool.Prefix, gw)
}

// free finds the lowest free address of a pool and moves its cursor there;
// ok is false when the pool is full. The address stays free.
func (srv *Server) free(st *store.State, name string) (netip.Addr, bool) {
	pool := srv.cfg.Pools[name]
	if pool == nil {
		return netip.Addr{}, false
	}
	cur, _ := st.Cursor(name)
	if cur.Full {
		return netip.Addr{}, false
	}
	a, err := pool.AllocateFrom(cur.Next, func(a netip.Addr) bool { return st.Held(a) != nil })
	if err != nil {
		st.SetCursor(name, store.Cursor{Full: true})
		return netip.Addr{}, false
	}
	st.SetCursor(name, store.Cursor{Next: a})
	return a, true
}

// take is free for an address about to be assigned.
func (srv *Server) take(st *store.State, name string) (netip.Addr, bool) {
	a, ok := srv.free(st, name)
	if ok {
		st.SetCursor(name, store.Cursor{Next: a.Next()})
	}
	return a, ok
}

// exhausted queues c behind the claims already waiting for its pool.
func (srv *Server) exhausted(st *store.State, c *store.Claim) {
	st.Enqueue(c)
	msg := fmt.Sprintf("pool %q has no free address for claim %s", c.Pool, c.Name)
	if srv.setReason(st, c, protocol.ReasonPoolExhausted, msg) {
		srv.log.WithFields(logrus.Fields{"pool": c.Pool, "claim": c.Name, "waiting": st.QueueLen(c.Pool)}).
			Warnf("pool %s exhausted: claim %s waits for a free address", c.Pool, c.Name)
	}
}

// setReason records why c has no address; it reports a change.
func (srv *Server) setReason(st *store.State, c *store.Claim, reason, msg string) bool {
	if c.Reason == reason && c.Message == msg {
		return false
	}
	c.Reason, c.Message = reason, msg
	st.TouchClaim(c)
	return true
}

// serveWaiting gives freed addresses to the claims waiting longest. With
// no address free it costs one cursor look-up per pool with a queue.
func (srv *Server) serveWaiting(st *store.State, now time.Time) {
	for _, p := range st.WaitingPools() {
		for c := st.Waiting(p); c != nil; c = st.Waiting(p) {
			if _, ok := srv.free(st, p); !ok {
				break
			}
			srv.allocate(st, c, now)
			if c.Address == "" {
				break
			}
		}
	}
}

// reconcileOwn serves an inventory's own claims, after the queues.
func (srv *Server) reconcileOwn(st *store.State, hash string, now time.Time) {
	srv.serveWaiting(st, now)
	for _, c := range st.ClaimsOf(hash) {
		if c.Address == "" {
			srv.allocate(st, c, now)
		}
	}
}

// reconcileAll serves every claim without an address in creation order:
// at start only, where it also rebuilds the queues.
func (srv *Server) reconcileAll(st *store.State, now time.Time) {
	for _, c := range st.Claims {
		if c.Address == "" {
			srv.allocate(st, c, now)
		}
	}
}

// wouldWait reports whether a new inventory with this template would be
// left with a claim without an address.
func (srv *Server) wouldWait(st *store.State, pools map[string]string) bool {
	if len(pools) == 0 {
		return false
	}
	if srv.delay > 0 {
		return true
	}
	for _, p := range pools {
		if st.Waiting(p) != nil {
			return true
		}
		if _, ok := srv.free(st, p); !ok {
			return true
		}
	}
	return false
}
