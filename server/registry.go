package server

import (
	"fmt"
	"html"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/labeltmpl"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// LabelPrefix is upstream's default label and annotation prefix.
const LabelPrefix = "elemental.cattle.io/"

// defaultMachineName is upstream's name when a registration sets none.
const defaultMachineName = "m-${Random/UUID}"

// registerInventory creates or refreshes the inventory for s in st, the
// way the operator handles MsgGet (PROTOCOL.md 4.6). Failures are
// *protocol.ErrorReply so the client sees them as MsgError.
func (srv *Server) registerInventory(st *store.State, reg *regconfig.Registration, s *protocol.ServerSession, now time.Time) (*store.Inventory, error) {
	data := labeltmpl.Data(s.SMBIOS, s.SystemData)
	inv := st.Inventories[s.Identity.Hash]
	if inv == nil {
		tmpl := reg.MachineName
		if tmpl == "" {
			tmpl = defaultMachineName
		}
		raw, err := labeltmpl.Render(tmpl, data, srv.rnd)
		if err != nil {
			return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: machineName: %v", err)}
		}
		name := labeltmpl.SanitizeName(raw)
		if name == "" {
			return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: machineName %q renders to an empty name", tmpl)}
		}
		for _, other := range st.Inventories {
			if other.Name == name {
				return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: name %q is taken by machine hash %s", name, other.Hash)}
			}
		}
		inv = &store.Inventory{Name: name, Hash: s.Identity.Hash, CreatedAt: now}
	}
	if _, err := st.SetHardware(inv.Hash, s.SMBIOS, s.SystemData, srv.maxHW); err != nil {
		return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory update failed: %v", err)}
	}
	inv.AuthKind = s.Identity.Kind
	inv.Registration = reg.Name
	inv.UpdatedAt = now

	labels := map[string]string{}
	for k, tmpl := range reg.MachineInventoryLabels {
		v, err := labeltmpl.Render(tmpl, data, srv.rnd)
		if err != nil {
			// Upstream skips labels that fail to render.
			srv.log.WithField("inventory", inv.Name).Warnf("label %s skipped: %v", k, err)
			continue
		}
		labels[k] = labeltmpl.SanitizeLabelValue(v)
	}
	for k, tmpl := range s.Labels {
		v, err := labeltmpl.Render(tmpl, data, srv.rnd)
		if err != nil {
			srv.log.WithField("inventory", inv.Name).Warnf("client label %s skipped: %v", k, err)
			continue
		}
		labels[LabelPrefix+k] = labeltmpl.SanitizeLabelValue(v)
	}
	inv.Labels = labels

	ann := maps.Clone(reg.MachineInventoryAnnotations)
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range s.Annotations {
		ann[LabelPrefix+sanitizeAnnotation(k)] = sanitizeAnnotation(v)
	}
	if r := reg.Config.Elemental.Reset; r != nil && r.Enabled {
		ann[LabelPrefix+"resettable"] = "true"
	}
	inv.Annotations = ann

	inv.Network = nil
	if n := reg.Network; n != nil && n.Configurator != protocol.ConfiguratorNone {
		inv.Network = &store.NetworkTemplate{
			Configurator: n.Configurator,
			IPAddresses:  maps.Clone(n.IPAddresses),
			Config:       n.Config,
		}
	}
	st.PutInventory(inv)
	srv.syncClaims(st, inv, now)
	return inv, nil
}

// sanitizeAnnotation mirrors upstream: CR and LF removed, HTML-escaped.
func sanitizeAnnotation(s string) string {
	s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	return html.EscapeString(s)
}

// syncClaims keeps exactly one claim per (inventory, placeholder name) of
// the inventory's template: missing ones are created, ones for names the
// template dropped are released, and a claim whose pool changed is
// replaced.
func (srv *Server) syncClaims(st *store.State, inv *store.Inventory, now time.Time) {
	want := map[string]string{}
	if inv.Network != nil {
		want = inv.Network.IPAddresses
	}
	have := map[string]bool{}
	for _, c := range slices.Clone(st.Claims) {
		if c.Inventory != inv.Hash {
			continue
		}
		if pool, ok := want[c.IPName]; !ok || pool != c.Pool || have[c.IPName] {
			st.RemoveClaim(c)
			continue
		}
		have[c.IPName] = true
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if have[n] {
			continue
		}
		st.AddClaim(&store.Claim{
			Name:      inv.Name + "-" + n,
			Inventory: inv.Hash,
			IPName:    n,
			Pool:      want[n],
			CreatedAt: now,
			NotBefore: now.Add(srv.delay),
		})
	}
}

// reconcile gives due claims their addresses, in claim creation order,
// lowest free address first (REFERENCE.md 4.7). It reports whether any
// claim changed. Claims already holding an address keep it, so the same
// machine keeps its address across registrations and restarts.
//
// Addresses in use are looked up in one registry for the whole server, not
// per pool: a pool renamed or reshaped between restarts still finds the
// addresses its old claims hold, so no address is ever held by two claims.
func (srv *Server) reconcile(st *store.State, now time.Time) bool {
	var held map[netip.Addr]*store.Claim
	changed := false
	set := func(c *store.Claim, reason, msg string) {
		if c.Reason != reason || c.Message != msg {
			c.Reason, c.Message = reason, msg
			st.TouchClaim(c)
			changed = true
		}
	}
	for _, c := range st.Claims {
		if c.Address != "" {
			continue
		}
		pool := srv.cfg.Pools[c.Pool]
		switch {
		case pool == nil:
			set(c, protocol.ReasonAllocationFailed, fmt.Sprintf("claim %s: pool %q is not declared", c.Name, c.Pool))
		case now.Before(c.NotBefore):
			set(c, protocol.ReasonWaitingForIPAddress, "Waiting to claim IPAddress "+c.Name)
		default:
			if held == nil {
				held = addressRegistry(st)
			}
			a, err := pool.Allocate(func(a netip.Addr) bool { return held[a] != nil })
			if err != nil {
				set(c, protocol.ReasonPoolExhausted, fmt.Sprintf("pool %q has no free address for claim %s", c.Pool, c.Name))
				continue
			}
			held[a] = c
			c.Address, c.Prefix = a.String(), pool.Prefix
			c.Gateway = ""
			if pool.Gateway.IsValid() {
				c.Gateway = pool.Gateway.String()
			}
			c.Reason, c.Message = "", ""
			st.TouchClaim(c)
			changed = true
		}
	}
	return changed
}

// addressRegistry maps every address a claim holds, whatever its pool, to
// that claim.
func addressRegistry(st *store.State) map[netip.Addr]*store.Claim {
	held := make(map[netip.Addr]*store.Claim, len(st.Claims))
	for _, c := range st.Claims {
		if c.Address == "" {
			continue
		}
		if a, err := netip.ParseAddr(c.Address); err == nil {
			held[a.Unmap()] = c
		}
	}
	return held
}

// netStatus is an inventory's network config once every claim holds an
// address; otherwise the first claim that does not, as an ErrorReply.
func (srv *Server) netStatus(st *store.State, inv *store.Inventory, now time.Time) (*protocol.NetworkConfig, *protocol.ErrorReply, time.Time) {
	if inv.Network == nil {
		return &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNone}, nil, time.Time{}
	}
	ips := map[string]string{}
	for _, c := range st.Claims {
		if c.Inventory != inv.Hash {
			continue
		}
		if c.Address == "" {
			er := &protocol.ErrorReply{Reason: c.Reason, Message: c.Message}
			if c.Reason == protocol.ReasonWaitingForIPAddress {
				er.RetryAfterSeconds = max(1, int(math.Ceil(c.NotBefore.Sub(now).Seconds())))
			}
			return nil, er, c.NotBefore
		}
		ips[c.IPName] = c.Address
	}
	return &protocol.NetworkConfig{
		Configurator: inv.Network.Configurator,
		IPAddresses:  ips,
		// The template goes out unchanged: substituting placeholders is
		// the agent's job, as with elemental-operator.
		Config: inv.Network.Config,
	}, nil, time.Time{}
}

// releaseInventory deletes an inventory (by name or hash) and its claims.
func releaseInventory(st *store.State, key string) (*store.Inventory, []*store.Claim) {
	inv := find(st, key)
	if inv == nil {
		return nil, nil
	}
	return inv, st.DeleteInventory(inv.Hash)
}
