package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// session is the SessionHandler of one registration connection.
type session struct {
	srv *Server
	reg *regconfig.Registration
	url string
	// explicit: the client announced it asks with MsgNetworkConfig
	// (protocol.HeaderNetworkConfig), so MsgGet need not wait for it.
	explicit bool
	// client is the connection's remote address, for per-client limits.
	client string
}

var errNotFound = &protocol.ErrorReply{Message: "MachineInventory not found", Reason: protocol.ReasonInventoryNotFound}

func (h *session) Update(_ context.Context, s *protocol.ServerSession) error {
	found := false
	h.srv.store.View(func(st *store.State) { found = st.Inventories[s.Identity.Hash] != nil })
	if !found {
		h.srv.log.WithField("machine", s.Identity.Hash).Warn("update for unknown inventory: the machine needs a fresh registration (--reset)")
		return errNotFound
	}
	return nil
}

func (h *session) Get(ctx context.Context, s *protocol.ServerSession) (*protocol.ConfigReply, error) {
	srv := h.srv
	var (
		name    string
		nc      *protocol.NetworkConfig
		pending *protocol.ErrorReply
		readyAt time.Time
	)
	err := srv.store.Update(func(st *store.State) (bool, error) {
		if er := srv.conflict.refuse(srv, st, s.Identity.Hash); er != nil {
			return false, er
		}
		now := srv.now()
		inv, err := srv.registerInventory(st, h.reg, s, h.client, now)
		if err != nil {
			return false, err
		}
		srv.reconcileOwn(st, inv.Hash, now)
		name = inv.Name
		nc, pending, readyAt = srv.netStatus(st, inv, now)
		return true, nil
	})
	if err != nil {
		var er *protocol.ErrorReply
		if errors.As(err, &er) {
			return nil, er
		}
		return nil, fmt.Errorf("MachineInventory update failed: %w", err)
	}
	if pending != nil && s.Version >= protocol.Version && !h.explicit {
		if pending.Reason != protocol.ReasonAllocationFailed {
			nc, pending = h.waitNetwork(ctx, s.Identity.Hash, pending, readyAt)
		}
		if pending != nil {
			// Never a config without its network section: upstream
			// clients would take it as final. The session fails, the
			// client retries, as with elemental-operator.
			srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "inventory": name, "pending": pending.Error()}).Info("network config not ready; session ends with an error")
			return nil, &protocol.ErrorReply{Reason: pending.Reason, RetryAfterSeconds: pending.RetryAfterSeconds,
				Message: "NetworkConfig not ready: " + pending.Message}
		}
	}
	return h.configReply(s, name, nc, pending), nil
}

// configReply is MsgConfig: the registration's config, and the network
// config when every claim holds an address.
func (h *session) configReply(s *protocol.ServerSession, name string, nc *protocol.NetworkConfig, pending *protocol.ErrorReply) *protocol.ConfigReply {
	srv := h.srv
	cfg := h.reg.Config
	cfg.Elemental.Registration = srv.registrationBlock(h.reg, h.url)
	if cfg.Elemental.SystemAgent.URL != "" {
		cfg.Elemental.SystemAgent.SecretName = name
	}
	reply := &protocol.ConfigReply{Config: cfg, ExplicitNetworkConfig: h.explicit}
	fields := logrus.Fields{"machine": s.Identity.Hash, "inventory": name, "registration": h.reg.Name, "version": s.Version, "update": s.Updated}
	switch {
	case pending != nil:
		fields["pending"] = pending.Error()
	case nc.IsReal():
		reply.Network = nc
		fields["addresses"] = formatIPs(nc.IPAddresses)
	default:
		fields["addresses"] = "none"
	}
	srv.log.WithFields(fields).Info("registered")
	return reply
}

// waitNetwork re-checks the inventory's claims until every one holds an
// address, a terminal reason shows up, or the bounded wait ends, whichever
// comes first. It keeps the reply inside the session deadline.
func (h *session) waitNetwork(ctx context.Context, hash string, pending *protocol.ErrorReply, readyAt time.Time) (*protocol.NetworkConfig, *protocol.ErrorReply) {
	srv := h.srv
	end := time.Now().Add(srv.wait)
	if srv.wait < 0 {
		end = time.Now()
	}
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	var nc *protocol.NetworkConfig
	for pending != nil && pending.Reason != protocol.ReasonAllocationFailed && pending.Reason != protocol.ReasonInventoryNotFound {
		// A delayed claim is due at readyAt; a full pool may be freed by
		// an admin at any time, so it is polled.
		step := networkPoll
		if pending.Reason == protocol.ReasonWaitingForIPAddress {
			step = min(max(readyAt.Sub(srv.now()), 0), networkPoll)
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, pending
		}
		t := time.NewTimer(min(step, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, pending
		case <-t.C:
		}
		err := srv.store.Update(func(st *store.State) (bool, error) {
			now := srv.now()
			inv := st.Inventories[hash]
			if inv == nil {
				// Deleted by an admin while we waited.
				pending = errNotFound
				return false, nil
			}
			srv.reconcileOwn(st, hash, now)
			nc, pending, readyAt = srv.netStatus(st, inv, now)
			return true, nil
		})
		if err != nil {
			return nil, &protocol.ErrorReply{Reason: protocol.ReasonAllocationFailed, Message: err.Error()}
		}
	}
	return nc, pending
}

func (h *session) NetworkConfig(_ context.Context, s *protocol.ServerSession) (*protocol.NetworkConfig, error) {
	srv := h.srv
	var (
		nc      *protocol.NetworkConfig
		pending *protocol.ErrorReply
	)
	err := srv.store.Update(func(st *store.State) (bool, error) {
		now := srv.now()
		inv := st.Inventories[s.Identity.Hash]
		if inv == nil {
			pending = errNotFound
			return false, nil
		}
		srv.reconcileOwn(st, inv.Hash, now)
		nc, pending, _ = srv.netStatus(st, inv, now)
		return true, nil
	})
	if err != nil {
		return nil, &protocol.ErrorReply{Reason: protocol.ReasonAllocationFailed, Message: err.Error()}
	}
	if pending != nil {
		srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "pending": pending.Error()}).Info("network config not ready")
		return nil, pending
	}
	srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "addresses": formatIPs(nc.IPAddresses)}).Info("network config sent")
	return nc, nil
}

func formatIPs(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
