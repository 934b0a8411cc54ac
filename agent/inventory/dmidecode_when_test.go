package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
)

// liveTree is a temporary tree the inventory takes for the live system
// (host.Live), so the checks for /dev/mem and the DMI table can be shown
// both ways without the test machine's own.
type liveTree struct{ host.Root }

func (t liveTree) Path(p string) string {
	if p == "/" {
		return "/"
	}
	return t.Root.Path(p)
}

// dmidecode runs where it can read something and where it was asked to;
// NODEREG_DMIDECODE= (NoDmidecode) turns it off everywhere.
func TestDmidecodeRunsOnlyWhereItCanWork(t *testing.T) {
	tree := func(files ...string) string {
		root := t.TempDir()
		for _, f := range files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	bare, table, mem := tree(), tree(host.DMITable), tree(host.DevMem)
	for _, c := range []struct {
		name  string
		files host.FS
		o     Options
		run   bool
		why   string
	}{
		{"live, no DMI table, no /dev/mem", liveTree{host.Root(bare)}, Options{}, false, "neither /sys/firmware/dmi/tables/DMI nor /dev/mem exists"},
		{"live, the default name, nothing to read", liveTree{host.Root(bare)}, Options{Dmidecode: "dmidecode"}, false, "neither"},
		{"live, DMI table", liveTree{host.Root(table)}, Options{}, true, ""},
		{"live, /dev/mem", liveTree{host.Root(mem)}, Options{Dmidecode: "dmidecode"}, true, ""},
		{"live, turned off", liveTree{host.Root(table)}, Options{NoDmidecode: true}, false, "NODEREG_DMIDECODE is set and empty"},
		{"a root, the default", host.Root(table), Options{}, false, ""},
		{"a root, a tool of its own", host.Root(bare), Options{Dmidecode: "/opt/bin/dmidecode"}, true, ""},
		{"a root, a tool of its own, turned off", host.Root(bare), Options{Dmidecode: "/opt/bin/dmidecode", NoDmidecode: true}, false, "set and empty"},
	} {
		run, _, why := dmidecodeRuns(c.files, c.o)
		if run != c.run || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: run %v (%q), want %v (%q)", c.name, run, why, c.run, c.why)
		}
	}
}
