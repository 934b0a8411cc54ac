package agent

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm"
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
			id, err := e.identify(e.phase(PhaseIdentity, redactor{}), conf, &prior{})
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

// A first emulated run saves the seed before it registers: with no SMBIOS
// UUID the seed is random, and a power cut before the run's end must not
// make the next boot draw another (a second inventory on the server).
func TestEmulatedSeedSavedBeforeRegistering(t *testing.T) {
	root := t.TempDir()
	seeds := map[int64]bool{}
	for range 2 {
		e := newEnv(Options{Root: root})
		st, _, err := state.Load(e.root, e.o.StatePath)
		if err != nil {
			t.Fatal(err)
		}
		conf := &configured{cfg: &protocol.Config{}}
		reg := &conf.cfg.Elemental.Registration
		reg.Auth = localconfig.AuthTPM
		reg.EmulateTPM = true
		reg.EmulatedTPMSeed = tpm.RandomSeed
		h := handoffs{conf: conf, prior: &prior{state: *st}}
		// In the default build the emulation is missing and Open fails:
		// the seed must be on disk all the same, the run stopping here.
		if err := e.runStage(t.Context(), stageOf(t, PhaseIdentity), e.phase(PhaseIdentity, redactor{}), &h); err == nil {
			h.id.tpm.Close()
		}
		saved, _, err := state.Load(e.root, e.o.StatePath)
		if err != nil || !saved.EmulatedTPM || saved.EmulatedTPMSeed != h.id.state.EmulatedTPMSeed {
			t.Fatalf("state after the identity phase: %+v, %v; want seed %d", saved, err, h.id.state.EmulatedTPMSeed)
		}
		seeds[saved.EmulatedTPMSeed] = true
	}
	if len(seeds) != 1 {
		t.Errorf("two runs cut before their end used seeds %v, want one", seeds)
	}
}

// stageOf is phaseList's stage for p.
func stageOf(t *testing.T, p Phase) stage {
	t.Helper()
	for _, s := range phaseList {
		if s.phase == p {
			return s
		}
	}
	t.Fatalf("no stage %s in phaseList", p)
	return stage{}
}
