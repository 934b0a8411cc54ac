package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nodereg/nodereg/server/store"
)

func TestAdminViews(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	register(t, s, "uuid-a")
	get := func(path string, into any) int {
		rec := httptest.NewRecorder()
		adminServe(s, rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return rec.Code
	}
	var invs []InventoryView
	if code := get("/admin/inventories", &invs); code != 200 || len(invs) != 1 || invs[0].Name != "m-uuid-a" ||
		len(invs[0].Claims) != 1 || invs[0].Claims[0].Address != "192.168.122.150" || invs[0].Labels["manufacturer"] != "QEMU" {
		t.Fatalf("inventories = %d %+v", code, invs)
	}
	if invs[0].SMBIOS != nil {
		t.Error("list view carries SMBIOS")
	}
	var one InventoryView
	if code := get("/admin/inventories/m-uuid-a", &one); code != 200 || one.SMBIOS == nil {
		t.Fatalf("single view = %d %+v", code, one)
	}
	var claims []store.Claim
	if code := get("/admin/claims", &claims); code != 200 || len(claims) != 1 || claims[0].Name != "m-uuid-a-inventory-ip" ||
		claims[0].Prefix != 24 || claims[0].Gateway != "192.168.122.1" {
		t.Fatalf("claims = %d %+v", code, claims)
	}
	var pools []PoolView
	if code := get("/admin/pools", &pools); code != 200 || len(pools) != 1 || pools[0].Total != 51 || pools[0].Used != 1 || pools[0].Free != 50 {
		t.Fatalf("pools = %d %+v", code, pools)
	}
	rec := httptest.NewRecorder()
	adminServe(s, rec, httptest.NewRequest(http.MethodPost, "/admin/claims", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /admin/claims = %d", rec.Code)
	}
}

// adminServe runs r through the admin API as a client on loopback sends it,
// with the admin token.
func adminServe(s *Server, w http.ResponseWriter, r *http.Request) {
	r.Host = "127.0.0.1:9090"
	r.Header.Set("Authorization", "Bearer "+testAdminToken)
	s.Admin(AdminOptions{Token: testAdminToken}).ServeHTTP(w, r)
}

const testAdminToken = "test-admin-token"

func TestAdminAPIApart(t *testing.T) {
	s := newServer(t, testConfig(t, "192.168.122.150-192.168.122.200"), memStore(t), nil)
	register(t, s, "uuid-a")
	// Not on the registration handler.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/admin/inventories/m-uuid-a", nil))
	if rec.Code == http.StatusOK {
		t.Fatal("the registration handler serves the admin API")
	}
	admin := s.Admin(AdminOptions{Token: "s3cret"})
	do := func(host, auth string) int {
		r := httptest.NewRequest(http.MethodGet, "/admin/claims", nil)
		r.Host = host
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		admin.ServeHTTP(rec, r)
		return rec.Code
	}
	for _, c := range []struct {
		host, auth string
		want       int
	}{
		{"127.0.0.1:9090", "Bearer s3cret", 200},
		{"[::1]:9090", "Bearer s3cret", 200},
		{"localhost:9090", "Bearer s3cret", 200},
		{"10.0.0.5", "Bearer s3cret", 200},
		{"127.0.0.1:9090", "", 401},
		{"127.0.0.1:9090", "Bearer wrong", 401},
		{"127.0.0.1:9090", "s3cret", 401},
		// DNS rebinding: the page's own name comes as Host.
		{"evil.example:9090", "Bearer s3cret", http.StatusMisdirectedRequest},
		{"localhost.evil.example", "", http.StatusMisdirectedRequest},
	} {
		if got := do(c.host, c.auth); got != c.want {
			t.Errorf("Host %q, Authorization %q: %d, want %d", c.host, c.auth, got, c.want)
		}
	}
}
