package localconfig

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

// TestConfigAndDropInsHeldToOneYAMLBudget: the config file and each
// drop-in are each held to one alias and node budget for the whole
// document (protocol.YAMLBudget), not one per value (docs/reliability.md). At the
// edge, a document one alias (1024 nodes) under the budget is read and
// one just over is refused, naming the file (and the drop-in that takes
// the file and its drop-ins, merged into one config, over it); so is the
// amplification shape, 7 KB of anchors used once per cloud-config value
// (about 23 million nodes), which each value alone kept under the budget.
func TestConfigAndDropInsHeldToOneYAMLBudget(t *testing.T) {
	const base = "elemental:\n  registration:\n    url: https://reg.example/elemental/registration/t\n    auth: mac\n"
	// The rest of each document is far fewer than 1000 nodes.
	under := (protocol.MaxReplyNodes - 1000 - testutil.AliasBulkNodes(0)) / 1024
	over := under + 2
	if testutil.AliasBulkNodes(under)+1000 > protocol.MaxReplyNodes || testutil.AliasBulkNodes(over) <= protocol.MaxReplyNodes {
		t.Fatalf("%d and %d aliases do not straddle the budget of %d nodes", under, over, protocol.MaxReplyNodes)
	}
	amplified := testutil.AmplifyAnchors("", "x-anchors") + "cloud-config:\n" + testutil.AmplifyValues("  ", 230)
	if len(amplified) > 8<<10 {
		t.Fatalf("the amplified document is %d bytes, want a few KB", len(amplified))
	}
	// A drop-in holds keys under elemental.registration only; one it
	// does not know is warned about.
	inDropIn := func(bulk string) string { return "elemental:\n  registration:\n" + bulk }
	dropInAmplified := inDropIn(testutil.AmplifyAnchors("    ", "x-anchors") + "    x-values:\n" + testutil.AmplifyValues("      ", 230))
	dropInDir := "oem/registration/config.d"
	for _, c := range []struct {
		name, config, dropIn string
		refused              string // the file named, "" when read
	}{
		{"config file, under", base + testutil.AliasBulk("", "x-bulk", under), "", ""},
		{"config file, over", base + testutil.AliasBulk("", "x-bulk", over), "", host.ConfigFile},
		{"config file, amplified", base + amplified, "", host.ConfigFile},
		{"drop-in, under", base, inDropIn(testutil.AliasBulk("    ", "x-bulk", under)), ""},
		{"drop-in, over", base, inDropIn(testutil.AliasBulk("    ", "x-bulk", over)), "50-x.yaml"},
		{"drop-in, amplified", base, dropInAmplified, "50-x.yaml"},
		// Merged into one config, the file and its drop-ins share one
		// budget: two drop-ins each half of it, with the file, cross it.
		{"two drop-ins, together over", base, inDropIn(testutil.AliasBulk("    ", "x-bulk", under/2+1)), "60-y.yaml"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", ""), func(t *testing.T) {
			root := t.TempDir()
			writeConfig(t, root, c.config)
			if c.dropIn != "" {
				writeFile(t, root, dropInDir+"/50-x.yaml", c.dropIn, 0o600)
			}
			if c.refused == "60-y.yaml" {
				writeFile(t, root, dropInDir+"/60-y.yaml", c.dropIn, 0o600)
			}
			_, err := Read(host.Root(root), host.ConfigFile, Overrides{}, nil)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("under the budget: %v", err)
				}
				return
			}
			if !errors.Is(err, protocol.ErrYAMLTooLarge) || !strings.Contains(err.Error(), filepath.Base(c.refused)) || !strings.Contains(err.Error(), root) {
				t.Fatalf("err %v, want the YAML budget's refusal naming %s", err, c.refused)
			}
		})
	}
}
