package nmstate_test

import (
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/nmstate"
)

// The nmstate tests render the same template the end-to-end tests serve, so
// a change to one that is not made to the other fails here.
func TestSeedTemplateIsTheServersTemplate(t *testing.T) {
	if got, want := nmstate.SeedTemplate, node.NmstateConfig(); got != want {
		t.Fatalf("nmstate's seedTemplate:\n%s\nnode.NmstateConfig():\n%s", got, want)
	}
}
