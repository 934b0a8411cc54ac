package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

// NODEREG_DMIDECODE reaches the inventory the run collects
// (docs/inventory.md): a path of its own is run even under a root (here it does not exist,
// and the inventory says it looked it up), and set but empty turns
// dmidecode off.
func TestDmidecodeEnvReachesTheInventory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-dmidecode")
	for _, c := range []struct {
		name, value, want string
	}{
		{"a path of its own", missing, `required tool dmidecode not found (looked up \"` + missing + `\")`}, // logfmt escapes the quotes
		{"set and empty", "", "dmidecode not run: turned off (NODEREG_DMIDECODE is set and empty)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(host.EnvDmidecode, c.value)
			var log testutil.Log
			if _, err := DumpInventory(context.Background(), Options{Root: t.TempDir(), Log: log.Entry()}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), c.want) {
				t.Errorf("the inventory did not take NODEREG_DMIDECODE=%q: no %q in\n%s", c.value, c.want, log.String())
			}
		})
	}
}
