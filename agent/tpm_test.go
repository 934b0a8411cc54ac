package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent/localconfig"
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
			e := newEnv(Options{DryRun: c.dryRun, PersistOnly: c.persistOnly, Out: &out})
			conf := &configured{cfg: &protocol.Config{}}
			conf.cfg.Elemental.Registration.Auth = localconfig.AuthTPM
			conf.cfg.Elemental.Registration.TPMDevice = s.Device()
			id, err := e.identify(e.phase(PhaseIdentity), conf, &prior{})
			if err != nil {
				t.Fatal(err)
			}
			x := tpmtest.RoundTrip(context.Background(), id.auth, tpmauth.New(tpmauth.Options{}))
			if err := id.tpm.Close(); err != nil {
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
