package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm/tpmtest"
)

// A dry run and a run under a scratch root prove the TPM identity without
// changing the TPM: its persistent handles are the same after the
// authentication; a live run persists the SRK and the EK as upstream does.
func TestIdentityLeavesTheTPMAloneUnlessLive(t *testing.T) {
	for _, c := range []struct {
		name                 string
		dryRun, persistOnly  bool
		wantUnchangedHandles bool
	}{
		{"dry-run", true, false, true},
		{"scratch-root", false, true, true},
		{"live", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tpmtest.StartSwtpm(t, false)
			before := s.PersistentHandles(t)
			var out strings.Builder
			r := newRun(Options{DryRun: c.dryRun, PersistOnly: c.persistOnly, Out: &out})
			r.cfg = &protocol.Config{}
			r.cfg.Elemental.Registration.Auth = authTPM
			r.cfg.Elemental.Registration.TPMDevice = s.Device()
			r.state = &state.State{}
			if err := r.openTPM(r.log); err != nil {
				t.Fatal(err)
			}
			x := tpmtest.RoundTrip(context.Background(), r.auth, tpmauth.New(tpmauth.Options{}))
			if err := r.tpm.Close(); err != nil {
				t.Fatal(err)
			}
			if x.ClientErr != nil || x.ServerErr != nil {
				t.Fatalf("client: %v, server: %v", x.ClientErr, x.ServerErr)
			}
			after := s.PersistentHandles(t)
			if unchanged := slices.Equal(after, before); unchanged != c.wantUnchangedHandles {
				t.Errorf("persistent handles %#x before, %#x after; want unchanged=%v", before, after, c.wantUnchangedHandles)
			}
		})
	}
}
