package server

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/labeltmpl"
	"github.com/nodereg/nodereg/server/store"
)

// conflictFault refuses the first inventory write of a fraction of the
// machines with the text elemental-operator sends when the Kubernetes API
// refuses its update because a controller changed the inventory in
// between (Options.UpdateConflict): how a client's retry of a transient
// refusal is tested against the server a fleet really meets. Each machine
// is decided once, at its first MsgGet, so a refused machine's next
// attempt goes through, as the operator's next attempt reads the new
// version.
type conflictFault struct {
	rate    float64
	mu      sync.Mutex
	decided map[string]bool // machine hash -> was refused
}

func newConflictFault(rate float64) *conflictFault {
	if rate <= 0 {
		return nil
	}
	return &conflictFault{rate: min(rate, 1), decided: map[string]bool{}}
}

// refuse is the conflict to send for this registration, nil to go on. It
// records nothing in st, so a refused registration leaves the store as it
// was (the API server refused the write).
func (f *conflictFault) refuse(srv *Server, st *store.State, hash string) *protocol.ErrorReply {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	_, seen := f.decided[hash]
	hit := !seen && f.coin(srv) < f.rate
	if !seen {
		f.decided[hash] = hit
	}
	f.mu.Unlock()
	if !hit {
		return nil
	}
	name := ""
	if inv := st.Inventories[hash]; inv != nil {
		name = inv.Name
	} else if n, err := labeltmpl.Render(defaultMachineName, nil, srv.rnd); err == nil {
		name = n // the name the operator gives a machine by default
	}
	srv.log.WithField("machine", hash).Info("fault: the first inventory update refused with a Kubernetes conflict (--fault-update-conflict)")
	return &protocol.ErrorReply{Message: conflictText(name)}
}

// conflictText is elemental-operator's MsgError for a conflicting update
// (pkg/server/server.go, commitMachineInventory and updateMachineInventory,
// around the API server's conflict). regserver has no namespaces:
// fleet-default is where Rancher's MachineRegistrations usually live.
func conflictText(name string) string {
	return fmt.Sprintf("MachineInventory update failed: failed to update machine inventory fleet-default/%s: "+
		"Operation cannot be fulfilled on machineinventories.elemental.cattle.io %q: "+
		"the object has been modified; please apply your changes to the latest version and try again", name, name)
}

// coin is a number in [0, 1) from the server's random source.
func (f *conflictFault) coin(srv *Server) float64 {
	var b [8]byte
	if _, err := srv.rnd.Read(b[:]); err != nil {
		return 1 // no randomness: no fault
	}
	return float64(binary.BigEndian.Uint64(b[:])>>11) / (1 << 53)
}
