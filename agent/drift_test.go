package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/protocol"
)

// The applicator under /oem edited by hand: the boot run leaves it (its
// cost stays a digest compare), the update run (RepairDrift) finds the
// drift with verify's checks, applies the same config again through
// nmstatectl's checkpoint, puts the applicator's bytes back and reports
// what drifted at the next registration.
func TestUpdateRunRepairsDrift(t *testing.T) {
	t.Setenv(host.EnvNmstatectl, testbin.NmstatectlStub(t))
	t.Setenv(host.EnvNmcli, "nodereg-test-no-such-nmcli")
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{Network: nmstateConfig(t)}}}}}
	url := s.start(t)
	m := node.New(t, "52:54:00:aa:00:29", url, "    no-smbios: true\n")
	run := func(repair bool) *state.State {
		t.Helper()
		_, err := Run(t.Context(), Options{
			Root: m.Root, Runner: m.Runner(), Clock: retrytest.NewClock(time.Now()),
			Deadline: time.Minute, NetworkTimeout: time.Minute, RepairDrift: repair,
		})
		testutil.Must(t, err)
		st, _, err := state.Load(host.Root(m.Root), DefaultStatePath)
		testutil.Must(t, err)
		return st
	}
	applies := func() int { return strings.Count(strings.Join(m.Stub().Subcommands(t), "\n"), "apply") }
	app := filepath.Join(m.Root, apply.DefaultPaths().Applicator)

	run(false)
	good, err := os.ReadFile(app)
	testutil.Must(t, err)
	if applies() != 1 {
		t.Fatalf("first run: %d applies, want 1", applies())
	}
	edited := append(bytes.Clone(good), "# edited by hand\n"...)
	testutil.Must(t, os.WriteFile(app, edited, 0o600))

	run(false)
	if b, _ := os.ReadFile(app); !bytes.Equal(b, edited) || applies() != 1 {
		t.Fatalf("the boot run acted on drift (applies %d)", applies())
	}

	st := run(true)
	if b, _ := os.ReadFile(app); !bytes.Equal(b, good) {
		t.Errorf("drift repair did not put the applicator back:\n%s", b)
	}
	if applies() != 2 {
		t.Errorf("drift repair: %d applies in all, want 2 (through the checkpoint)", applies())
	}
	if !strings.Contains(st.NetworkDrift, "applicator: ") || !strings.Contains(st.NetworkDrift, "changed since it was written") {
		t.Errorf("kept drift %q, want the applicator finding", st.NetworkDrift)
	}

	run(true)
	if got := s.seen[len(s.seen)-1]["network-config.drift-repaired"]; !strings.Contains(got, "applicator") {
		t.Errorf("next registration reported drift-repaired %q", got)
	}
}
