package server

import (
	"errors"
	"fmt"
	"html"
	"maps"
	"math"
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

// defaultMachineName is upstream's name when a registration sets none, and
// its fallback when the registration's template names data the machine did
// not send (a machine without SMBIOS, elemental-register --no-smbios).
const defaultMachineName = "m-${Random/UUID}"

// registerInventory creates or refreshes the inventory for s in st, the
// way the operator handles MsgGet (docs/protocol.md, the registration
// conversation). Failures are *protocol.ErrorReply so the client sees
// them as MsgError; they come before anything is recorded.
func (srv *Server) registerInventory(st *store.State, reg *regconfig.Registration, s *protocol.ServerSession, client string, now time.Time) (*store.Inventory, error) {
	data := labeltmpl.Data(s.SMBIOS, s.SystemData)
	inv := st.Inventories[s.Identity.Hash]
	if inv == nil {
		var err error
		if inv, err = srv.newInventory(st, reg, s.Identity.Hash, data, client, now); err != nil {
			return nil, err
		}
	}
	if _, err := st.SetHardware(inv.Hash, s.SMBIOS, s.SystemData, srv.maxHW); err != nil {
		return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory update failed: %v", err)}
	}
	inv.AuthKind = s.Identity.Kind
	inv.Registration = reg.Name
	inv.UpdatedAt = now
	inv.Labels = srv.mergeLabels(inv, reg, s.Labels, data)
	inv.Annotations = annotations(reg, s.Annotations)
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

// newInventory names a new machine's inventory after the registration's
// template, once the client's limits allow one more.
func (srv *Server) newInventory(st *store.State, reg *regconfig.Registration, hash string, data map[string]any, client string, now time.Time) (*store.Inventory, error) {
	var pools map[string]string
	if reg.Network != nil && reg.Network.Configurator != protocol.ConfiguratorNone {
		pools = reg.Network.IPAddresses
	}
	if er := srv.admitInventory(st, reg, client, pools, now); er != nil {
		return nil, er
	}
	tmpl := reg.MachineName
	if tmpl == "" {
		tmpl = defaultMachineName
	}
	raw, err := labeltmpl.Render(tmpl, data, srv.rnd)
	if errors.Is(err, labeltmpl.ErrNoValue) {
		// As upstream: a name template the machine's data cannot fill
		// falls back to a generated name rather than failing.
		fallback, ferr := labeltmpl.Render(defaultMachineName, nil, srv.rnd)
		if ferr != nil {
			return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: machineName: %v", ferr)}
		}
		srv.log.WithField("machine", hash).Warnf("machineName %q: %v; named %s instead", tmpl, err, fallback)
		raw, err = fallback, nil
	}
	if err != nil {
		return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: machineName: %v", err)}
	}
	name := labeltmpl.SanitizeName(raw)
	if name == "" {
		return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: machineName %q renders to an empty name", tmpl)}
	}
	if other := st.ByName(name); other != nil {
		return nil, &protocol.ErrorReply{Message: fmt.Sprintf("MachineInventory creation failed: name %q is taken by machine hash %s", name, other.Hash)}
	}
	return &store.Inventory{Name: name, Hash: hash, CreatedAt: now}, nil
}

// mergeLabels merges a registration's labels into the inventory's key by
// key, as upstream does: a label is added or replaced, never removed
// because a later registration did not render or send it, and a label
// from a Random template keeps its first value.
func (srv *Server) mergeLabels(inv *store.Inventory, reg *regconfig.Registration, client map[string]string, data map[string]any) map[string]string {
	labels := maps.Clone(inv.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	render := func(k, tmpl, what string) (string, bool) {
		v, err := labeltmpl.Render(tmpl, data, srv.rnd)
		if err != nil {
			// Upstream skips labels that fail to render.
			srv.log.WithField("inventory", inv.Name).Warnf("%s %s skipped: %v", what, k, err)
			return "", false
		}
		return labeltmpl.SanitizeLabelValue(v), true
	}
	for _, k := range slices.Sorted(maps.Keys(reg.MachineInventoryLabels)) {
		tmpl := reg.MachineInventoryLabels[k]
		if labels[k] != "" && labeltmpl.IsRandom(tmpl) {
			continue
		}
		if v, ok := render(k, tmpl, "label"); ok {
			labels[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(client)) {
		if v, ok := render(k, client[k], "client label"); ok {
			labels[LabelPrefix+k] = v
		}
	}
	return labels
}

// annotations are the registration's plus the machine's, prefixed.
func annotations(reg *regconfig.Registration, sent map[string]string) map[string]string {
	ann := maps.Clone(reg.MachineInventoryAnnotations)
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range sent {
		ann[LabelPrefix+sanitizeAnnotation(k)] = sanitizeAnnotation(v)
	}
	if r := reg.Config.Elemental.Reset; r != nil && r.Enabled {
		ann[LabelPrefix+"resettable"] = "true"
	}
	return ann
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
	for _, c := range slices.Clone(st.ClaimsOf(inv.Hash)) {
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

// netStatus is an inventory's network config once every claim holds an
// address; otherwise the first claim that does not, as an ErrorReply.
func (srv *Server) netStatus(st *store.State, inv *store.Inventory, now time.Time) (*protocol.NetworkConfig, *protocol.ErrorReply, time.Time) {
	if inv.Network == nil {
		return &protocol.NetworkConfig{Configurator: protocol.ConfiguratorNone}, nil, time.Time{}
	}
	ips := map[string]string{}
	for _, c := range st.ClaimsOf(inv.Hash) {
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

// releaseInventory deletes an inventory (by name or hash) and its claims,
// and gives the freed addresses to the claims waiting longest.
func (srv *Server) releaseInventory(st *store.State, key string, now time.Time) (*store.Inventory, []*store.Claim) {
	inv := find(st, key)
	if inv == nil {
		return nil, nil
	}
	released := st.DeleteInventory(inv.Hash)
	srv.serveWaiting(st, now)
	return inv, released
}

// find is an inventory by hash or name.
func find(st *store.State, key string) *store.Inventory {
	if inv := st.Inventories[key]; inv != nil {
		return inv
	}
	return st.ByName(key)
}
