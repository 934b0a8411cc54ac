package store

import (
	"sort"
	"time"
)

// StaleCriteria select inventories to clean up (docs/regserver.md,
// Cleaning up): fake or dead machines hold claims (and so addresses, or
// places in a pool's queue) until an operator removes them. A zero
// duration disables its criterion; an inventory matching either is stale.
type StaleCriteria struct {
	// Unaddressed: inventories with claims none of which ever got an
	// address, created at least this long ago.
	Unaddressed time.Duration
	// Unseen: inventories whose last registration is at least this old.
	Unseen time.Duration
}

// Stale is one inventory the criteria select, and why.
type Stale struct {
	Name      string    `json:"name"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Why       string    `json:"why"`
	// Addresses it holds (released with it).
	Addresses []string `json:"addresses,omitempty"`
}

// Stale lists the inventories c selects, by name.
func (st *State) Stale(now time.Time, c StaleCriteria) []Stale {
	var out []Stale
	for _, inv := range st.Inventories {
		why := ""
		claims := st.ClaimsOf(inv.Hash)
		var addrs []string
		for _, cl := range claims {
			if cl.Address != "" {
				addrs = append(addrs, cl.Address)
			}
		}
		switch {
		case c.Unaddressed > 0 && len(claims) > 0 && len(addrs) == 0 && now.Sub(inv.CreatedAt) >= c.Unaddressed:
			why = "never got an address, created " + now.Sub(inv.CreatedAt).Round(time.Second).String() + " ago"
		case c.Unseen > 0 && now.Sub(inv.UpdatedAt) >= c.Unseen:
			why = "not seen for " + now.Sub(inv.UpdatedAt).Round(time.Second).String()
		default:
			continue
		}
		out = append(out, Stale{Name: inv.Name, Hash: inv.Hash, CreatedAt: inv.CreatedAt, UpdatedAt: inv.UpdatedAt, Why: why, Addresses: addrs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
