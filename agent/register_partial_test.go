package agent

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/inventory"
	"github.com/nodereg/nodereg/internal/host"
)

// A scratch root without sys/: the partial-inventory warning says that
// --root moved /sys and how to bind it (docs/cli.md, "--root").
func TestPartialInventoryUnderARootWithoutSysSaysWhy(t *testing.T) {
	root := t.TempDir()
	var out bytes.Buffer
	l := logrus.New()
	l.SetOutput(&out)
	p := collectInventory(context.Background(), inventory.Options{Files: host.Root(root), Log: logrus.NewEntry(l), NoDmidecode: true})
	if _, err := p.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "inventory is partial") || !strings.Contains(s, "--root moves /sys too") {
		t.Errorf("no reason for the partial inventory under a root without sys/:\n%s", s)
	}
}
