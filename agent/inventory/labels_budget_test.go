package inventory

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/protocol"
)

// The labels file is held to the budget of every local YAML
// (protocol.YAMLBudget): a document of aliases one past the budget, and the
// amplification shape whose every value alone is under it, are refused
// before they decode, naming the file; one alias under the budget gets as
// far as decoding (where a list is no label, a plain type error).
func TestLabelsFileHeldToTheYAMLBudget(t *testing.T) {
	under := (protocol.MaxReplyNodes - testutil.AliasBulkNodes(0)) / 1024
	over := under + 1
	if testutil.AliasBulkNodes(under) > protocol.MaxReplyNodes || testutil.AliasBulkNodes(over) <= protocol.MaxReplyNodes {
		t.Fatalf("%d and %d aliases do not straddle the budget of %d nodes", under, over, protocol.MaxReplyNodes)
	}
	amplified := testutil.AmplifyAnchors("", "x-anchors") + testutil.AmplifyValues("", 230)
	dir := t.TempDir()
	file := filepath.Join(dir, "labels.yaml")
	for _, c := range []struct {
		name, text string
		tooLarge   bool
	}{
		{"under", testutil.AliasBulk("", "x-bulk", under), false},
		{"over", testutil.AliasBulk("", "x-bulk", over), true},
		{"amplified", amplified, true},
	} {
		if err := os.WriteFile(file, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Labels(host.Root(dir), nil, "/labels.yaml", nil)
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: err = %v, want a refusal naming %s", c.name, err, file)
			continue
		}
		if got := errors.Is(err, protocol.ErrYAMLTooLarge); got != c.tooLarge {
			t.Errorf("%s: over the budget %v, want %v (%v)", c.name, got, c.tooLarge, err)
		}
	}
}
