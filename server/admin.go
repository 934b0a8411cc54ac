package server

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodereg/nodereg/server/store"
)

// InventoryView is one inventory in the admin JSON.
type InventoryView struct {
	Name         string            `json:"name"`
	Hash         string            `json:"hash"`
	AuthKind     string            `json:"authKind"`
	Registration string            `json:"registration"`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Claims       []store.Claim     `json:"claims,omitempty"`
	// SMBIOS and SystemData only in the single-inventory view.
	SMBIOS     map[string]any `json:"smbios,omitempty"`
	SystemData map[string]any `json:"systemData,omitempty"`
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
}

// AdminOptions configure the admin API.
type AdminOptions struct {
	// Token, when set, must come as "Authorization: Bearer <Token>".
	Token string
}

// Admin is the admin API's handler, for a listener of its own: nodes need
// the registration listener on the network, the admin API has no business
// there.
//
// It answers only requests whose Host is an IP address or localhost: a
// web page on a DNS name the attacker re-points at 127.0.0.1 (DNS
// rebinding) sends its own name as Host and is refused before anything
// else happens.
func (s *Server) Admin(o AdminOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostIsAddress(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "Host " + strconv.Quote(r.Host) + " is not an IP address or localhost (DNS rebinding?)"})
			return
		}
		if o.Token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="regserver admin"`)
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin API: bearer token missing or wrong"})
				return
			}
		}
		if !strings.HasPrefix(r.URL.Path, "/admin/") {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no admin endpoint " + r.URL.Path})
			return
		}
		s.serveAdmin(w, r)
	})
}

// hostIsAddress reports whether a Host header names the server by address.
func hostIsAddress(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// serveAdmin is the JSON admin view: read-only except for deleting an
// inventory, which releases its address claims.
//
//	GET    /admin/inventories
//	GET    /admin/inventories/<name or hash>
//	DELETE /admin/inventories/<name or hash>
//	GET    /admin/claims
//	GET    /admin/pools
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/"), "/")
	coll, key, _ := strings.Cut(rest, "/")
	switch {
	case coll == "inventories" && key == "" && r.Method == http.MethodGet:
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
	case coll == "inventories" && key != "" && r.Method == http.MethodGet:
		var body json.RawMessage
		s.store.View(func(st *store.State) {
			if inv := find(st, key); inv != nil {
				body = mustJSON(view(st, inv, true))
			}
		})
		if body == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "inventory " + key + " not found"})
			return
		}
		writeJSON(w, http.StatusOK, body)
	case coll == "inventories" && key != "" && r.Method == http.MethodDelete:
		var (
			inv      *store.Inventory
			released []*store.Claim
		)
		err := s.store.Update(func(st *store.State) (bool, error) {
			inv, released = releaseInventory(st, key)
			return inv != nil, nil
		})
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "deleting inventory " + key + ": " + err.Error()})
			return
		}
		if inv == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "inventory " + key + " not found"})
			return
		}
		addrs := []string{}
		for _, c := range released {
			if c.Address != "" {
				addrs = append(addrs, c.Address)
			}
		}
		s.log.WithFields(map[string]any{"machine": inv.Hash, "inventory": inv.Name, "released": strings.Join(addrs, ",")}).Info("inventory deleted")
		answer := map[string]any{"deleted": inv.Name, "hash": inv.Hash, "released": addrs}
		if len(addrs) > 0 {
			// The server cannot know whether the machine still uses them.
			answer["warning"] = fmt.Sprintf("inventory %s held %s: the machine may still be configured with them, and they go to the next machine that claims from their pool", inv.Name, strings.Join(addrs, ", "))
		}
		writeJSON(w, http.StatusOK, answer)
	case coll == "claims" && key == "" && r.Method == http.MethodGet:
		out := []store.Claim{}
		s.store.View(func(st *store.State) {
			for _, c := range st.Claims {
				out = append(out, *c)
			}
		})
		writeJSON(w, http.StatusOK, out)
	case coll == "pools" && key == "" && r.Method == http.MethodGet:
		used := map[string]uint64{}
		s.store.View(func(st *store.State) {
			for _, c := range st.Claims {
				if c.Address != "" {
					used[c.Pool]++
				}
			}
		})
		out := []PoolView{}
		for name, p := range s.cfg.Pools {
			v := PoolView{Name: name, Prefix: p.Prefix, Total: p.Total(), Used: used[name]}
			for _, r := range p.Ranges() {
				v.Ranges = append(v.Ranges, r.String())
			}
			if p.Gateway.IsValid() {
				v.Gateway = p.Gateway.String()
			}
			if v.Total >= v.Used {
				v.Free = v.Total - v.Used
			}
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		writeJSON(w, http.StatusOK, out)
	case coll == "inventories" || coll == "claims" || coll == "pools":
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " not allowed on /admin/" + rest})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no admin endpoint /admin/" + rest})
	}
}

func find(st *store.State, key string) *store.Inventory {
	if inv := st.Inventories[key]; inv != nil {
		return inv
	}
	for _, inv := range st.Inventories {
		if inv.Name == key {
			return inv
		}
	}
	return nil
}

func view(st *store.State, inv *store.Inventory, full bool) InventoryView {
	v := InventoryView{
		Name: inv.Name, Hash: inv.Hash, AuthKind: inv.AuthKind, Registration: inv.Registration,
		CreatedAt: inv.CreatedAt, UpdatedAt: inv.UpdatedAt, Labels: inv.Labels, Annotations: inv.Annotations,
	}
	for _, c := range st.Claims {
		if c.Inventory == inv.Hash {
			v.Claims = append(v.Claims, *c)
		}
	}
	if full {
		// Read from the database: hardware data is not kept in memory.
		if hw, err := st.Hardware(inv.Hash); err == nil {
			v.SMBIOS, v.SystemData = hw.SMBIOS, hw.SystemData
		}
	}
	return v
}

// mustJSON encodes views built from the state; they hold only JSON-safe
// values (decoded JSON and strings), so an error is a programming error.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return b
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
