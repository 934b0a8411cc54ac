package server

import (
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// AdminOptions configure the admin API.
type AdminOptions struct {
	// Token must come as "Authorization: Bearer <Token>", on every
	// listener, loopback included: any local user can reach loopback.
	Token string
	// Insecure serves without a token. Without Token and without
	// Insecure every request is refused.
	Insecure bool
}

// Admin is the admin API's handler, for a listener of its own: nodes need
// the registration listener on the network, the admin API has no business
// there (docs/regserver.md, Admin API).
//
// It answers only requests whose Host is an IP address or localhost: a
// web page on a DNS name the attacker re-points at 127.0.0.1 (DNS
// rebinding) sends its own name as Host and is refused before anything
// else happens.
func (s *Server) Admin(o AdminOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostIsAddress(r.Host) {
			writeJSON(w, http.StatusMisdirectedRequest, errBody("Host "+strconv.Quote(r.Host)+" is not an IP address or localhost (DNS rebinding?)"))
			return
		}
		if !o.Insecure {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if o.Token == "" || !ok || subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="regserver admin"`)
				writeJSON(w, http.StatusUnauthorized, errBody("admin API: bearer token missing or wrong (the token file's path is printed at start)"))
				return
			}
		}
		if !strings.HasPrefix(r.URL.Path, "/admin/") {
			writeJSON(w, http.StatusNotFound, errBody("no admin endpoint "+r.URL.Path))
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

// serveAdmin is the JSON admin view: read-only except for deleting
// inventories, which releases their address claims.
//
//	GET    /admin/inventories
//	GET    /admin/inventories/<name or hash>
//	DELETE /admin/inventories/<name or hash>
//	GET    /admin/claims
//	GET    /admin/pools
//	GET    /admin/stale?unaddressed=D&unseen=D
//	DELETE /admin/stale?unaddressed=D&unseen=D
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/admin/"), "/")
	coll, key, _ := strings.Cut(rest, "/")
	get, del := r.Method == http.MethodGet, r.Method == http.MethodDelete
	switch {
	case coll == "inventories" && key == "" && get:
		s.adminInventories(w)
	case coll == "inventories" && key != "" && get:
		s.adminInventory(w, key)
	case coll == "inventories" && key != "" && del:
		s.adminDelete(w, key)
	case coll == "claims" && key == "" && get:
		s.adminClaims(w)
	case coll == "pools" && key == "" && get:
		s.adminPools(w)
	case coll == "stale" && key == "" && (get || del):
		s.adminStale(w, r, del)
	case coll == "inventories" || coll == "claims" || coll == "pools" || coll == "stale":
		writeJSON(w, http.StatusMethodNotAllowed, errBody(r.Method+" not allowed on /admin/"+rest))
	default:
		writeJSON(w, http.StatusNotFound, errBody("no admin endpoint /admin/"+rest))
	}
}

func errBody(msg string) map[string]string { return map[string]string{"error": msg} }

// mustJSON encodes views built from the state; they hold only JSON-safe
// values (decoded JSON and strings), so an error is a programming error.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errBody(err.Error()))
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
