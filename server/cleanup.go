package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/nodereg/nodereg/server/store"
)

// Cleaning up (docs/regserver.md): inventories that never got an address
// or were not seen for a while, listed with GET and removed with DELETE,
// releasing their claims; the freed addresses go to the claims waiting
// longest in the same transaction.

// StaleCriteriaFromQuery reads ?unaddressed=D&unseen=D (Go durations, at
// least one).
func StaleCriteriaFromQuery(q map[string][]string) (store.StaleCriteria, error) {
	var c store.StaleCriteria
	for key, dst := range map[string]*time.Duration{"unaddressed": &c.Unaddressed, "unseen": &c.Unseen} {
		vs := q[key]
		if len(vs) == 0 || vs[0] == "" {
			continue
		}
		d, err := time.ParseDuration(vs[0])
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration such as 10m or 24h", key, vs[0])
		}
		*dst = d
	}
	if c.Unaddressed == 0 && c.Unseen == 0 {
		return c, fmt.Errorf("say which inventories are stale: unaddressed=D (never got an address, older than D) and/or unseen=D (not registered for D)")
	}
	return c, nil
}

// StaleReport is the answer of the clean-up operation.
type StaleReport struct {
	Removed   bool          `json:"removed"`
	Count     int           `json:"count"`
	Stale     []store.Stale `json:"inventories"`
	Addresses int           `json:"releasedAddresses"`
}

func (s *Server) adminStale(w http.ResponseWriter, r *http.Request, remove bool) {
	c, err := StaleCriteriaFromQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody(err.Error()))
		return
	}
	rep, err := s.RemoveStale(c, !remove)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errBody("removing stale inventories: "+err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// SweepStale lists the inventories c selects in st at now, and removes
// them when remove is set: the one sweep behind the admin API and
// regserver's offline prune, so both report and remove the same ones.
func SweepStale(st *store.State, now time.Time, c store.StaleCriteria, remove bool) StaleReport {
	rep := StaleReport{Stale: st.Stale(now, c), Removed: remove}
	if rep.Stale == nil {
		rep.Stale = []store.Stale{}
	}
	rep.Count = len(rep.Stale)
	for _, x := range rep.Stale {
		rep.Addresses += len(x.Addresses)
		if remove {
			st.DeleteInventory(x.Hash)
		}
	}
	return rep
}

// RemoveStale lists (dryRun) or removes the inventories c selects.
func (s *Server) RemoveStale(c store.StaleCriteria, dryRun bool) (StaleReport, error) {
	var rep StaleReport
	err := s.store.Update(func(st *store.State) (bool, error) {
		now := s.now()
		rep = SweepStale(st, now, c, !dryRun)
		if dryRun {
			return false, nil
		}
		s.serveWaiting(st, now)
		return true, nil
	})
	if err == nil && !dryRun && rep.Count > 0 {
		s.log.WithField("released", rep.Addresses).Infof("removed %d stale inventories", rep.Count)
	}
	return rep, err
}
