package bootstrap

import (
	"testing"

	"github.com/nodereg/nodereg/internal/nic"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

// A veth has no burnt-in address: the ioctl must say so rather than
// return zeros or the random current address.
func TestPermanentMACOfVethIsAbsent(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	var err error
	var hw string
	labkit.Enter(t, l.node, func() {
		a, e := nic.Permanent(nodeIf)
		hw, err = a.String(), e
	})
	if err == nil {
		t.Fatalf("veth %s: permanent address %s, want none", nodeIf, hw)
	}
}
