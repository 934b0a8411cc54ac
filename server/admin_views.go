package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/store"
)

// InventoryView is one inventory in the admin JSON: the store's record as
// it is kept (network template included), its claims, and in the
// single-inventory view the hardware data.
type InventoryView struct {
	store.Inventory
	Claims []store.Claim `json:"claims,omitempty"`
	// SMBIOS and SystemData only in the single-inventory view.
	store.Hardware
	// HardwareError says why the hardware data could not be read (a
	// damaged store page): the rest of the view is still good.
	HardwareError string `json:"hardwareError,omitempty"`
}

// PoolView is one pool's usage in the admin JSON.
type PoolView struct {
	Name    string   `json:"name"`
	Ranges  []string `json:"ranges"`
	Prefix  int      `json:"prefix"`
	Gateway string   `json:"gateway,omitempty"`
	Total   uint64   `json:"total"`
	Used    uint64   `json:"used"`
	Free    uint64   `json:"free"`
	// Waiting counts claims queued for an address; Reason is
	// PoolExhausted while any are.
	Waiting int    `json:"waiting"`
	Reason  string `json:"reason,omitempty"`
}

func (s *Server) adminInventories(w http.ResponseWriter) {
	// Encoded under the store lock: the views share maps with the state.
	var body json.RawMessage
	s.store.View(func(st *store.State) {
		out := []InventoryView{}
		for _, inv := range st.Inventories {
			out = append(out, view(st, inv, false))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		body = mustJSON(out)
	})
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) adminInventory(w http.ResponseWriter, key string) {
	var body json.RawMessage
	s.store.View(func(st *store.State) {
		if inv := find(st, key); inv != nil {
			body = mustJSON(view(st, inv, true))
		}
	})
	if body == nil {
		writeJSON(w, http.StatusNotFound, errBody("inventory "+key+" not found"))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) adminDelete(w http.ResponseWriter, key string) {
	var (
		inv      *store.Inventory
		released []*store.Claim
	)
	err := s.store.Update(func(st *store.State) (bool, error) {
		inv, released = s.releaseInventory(st, key, s.now())
		return inv != nil, nil
	})
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody("deleting inventory "+key+": "+err.Error()))
		return
	}
	if inv == nil {
		writeJSON(w, http.StatusNotFound, errBody("inventory "+key+" not found"))
		return
	}
	addrs := addresses(released)
	s.log.WithFields(map[string]any{"machine": inv.Hash, "inventory": inv.Name, "released": strings.Join(addrs, ",")}).Info("inventory deleted")
	answer := map[string]any{"deleted": inv.Name, "hash": inv.Hash, "released": addrs}
	if len(addrs) > 0 {
		// The server cannot know whether the machine still uses them.
		answer["warning"] = fmt.Sprintf("inventory %s held %s: the machine may still be configured with them, and they go to the next machine that claims from their pool", inv.Name, strings.Join(addrs, ", "))
	}
	writeJSON(w, http.StatusOK, answer)
}

func addresses(claims []*store.Claim) []string {
	out := []string{}
	for _, c := range claims {
		if c.Address != "" {
			out = append(out, c.Address)
		}
	}
	return out
}

func (s *Server) adminClaims(w http.ResponseWriter) {
	out := []store.Claim{}
	s.store.View(func(st *store.State) {
		for _, c := range st.Claims {
			out = append(out, *c)
		}
	})
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) adminPools(w http.ResponseWriter) {
	used := map[string]uint64{}
	waiting := map[string]int{}
	s.store.View(func(st *store.State) {
		for _, c := range st.Claims {
			switch {
			case c.Address != "":
				used[c.Pool]++
			case c.Reason == protocol.ReasonPoolExhausted:
				waiting[c.Pool]++
			}
		}
	})
	out := []PoolView{}
	for name, p := range s.cfg.Pools {
		v := PoolView{Name: name, Prefix: p.Prefix, Total: p.Total(), Used: used[name], Waiting: waiting[name]}
		for _, r := range p.Ranges() {
			v.Ranges = append(v.Ranges, r.String())
		}
		if p.Gateway.IsValid() {
			v.Gateway = p.Gateway.String()
		}
		if v.Total >= v.Used {
			v.Free = v.Total - v.Used
		}
		if v.Waiting > 0 {
			v.Reason = protocol.ReasonPoolExhausted
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
}

func view(st *store.State, inv *store.Inventory, full bool) InventoryView {
	v := InventoryView{Inventory: *inv}
	for _, c := range st.ClaimsOf(inv.Hash) {
		v.Claims = append(v.Claims, *c)
	}
	if full {
		// Read from the database: hardware data is not kept in memory.
		hw, err := st.Hardware(inv.Hash)
		if err != nil {
			v.HardwareError = err.Error()
		}
		v.Hardware = hw
	}
	return v
}
