package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/protocol"
)

// The run's shape: under --root R, R/oem/nodereg leads outside R. A
// run that persists a config writes the manifest, the digested config and
// the applicator's files inside R (the link followed with R as "/"), and
// nothing outside R.
func TestRunUnderRootWritesNothingOutside(t *testing.T) {
	for _, shape := range []string{"absolute", "relative"} {
		t.Run(shape, func(t *testing.T) {
			s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{Network: keyfileConfig(resolved)}}}}}
			m := node.New(t, "52:54:00:aa:00:38", s.start(t), "    no-smbios: true\n")
			outside := t.TempDir()
			link := filepath.Join(m.Root, host.StateDir)
			target := outside
			if shape == "relative" {
				rel, err := filepath.Rel(filepath.Dir(link), outside)
				testutil.Must(t, err)
				target = rel
			}
			testutil.Must(t, os.Symlink(target, link))
			var log testutil.Log
			if _, err := Run(t.Context(), Options{Root: m.Root, PersistOnly: true, Log: log.Entry(), Clock: retrytest.NewClock(time.Now()),
				Deadline: time.Minute, NetworkTimeout: time.Minute}); err != nil {
				t.Fatalf("run: %v\n%s", err, log.String())
			}
			if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
				t.Errorf("the run wrote outside the root: %v %v", entries, err)
			}
			if _, err := os.Stat(filepath.Join(m.Root, host.Applicator)); err != nil {
				t.Errorf("no applicator under the root: %v", err)
			}
			manifest, err := host.Root(m.Root).Stat(host.StateDir + "/network-manifest.json")
			if err != nil || !manifest.Mode().IsRegular() {
				t.Errorf("no manifest where the link leads inside the root: %v", err)
			}
		})
	}
}
