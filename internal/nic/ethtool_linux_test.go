package nic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
)

// On a NIC whose current address is its permanent one (addr_assign_type
// 0, nobody changed it), the ioctl must return what sysfs shows: this
// checks the request layout against the running kernel. Only reads.
func TestPermanentMACMatchesSysfsOnUnchangedNICs(t *testing.T) {
	entries, _ := os.ReadDir("/sys/class/net")
	checked := 0
	for _, e := range entries {
		dir := filepath.Join("/sys/class/net", e.Name())
		if dest, _ := os.Readlink(dir); strings.Contains(dest, "devices/virtual/") || host.ReadAttr(host.Root("/"), filepath.Join(dir, "addr_assign_type")) != "0" {
			continue
		}
		hw, err := Permanent(e.Name())
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if got, want := hw.String(), host.ReadAttr(host.Root("/"), filepath.Join(dir, "address")); got != want {
			t.Errorf("%s: ETHTOOL_GPERMADDR says %s, sysfs %s", e.Name(), got, want)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no physical NIC with its permanent address in this namespace")
	}
}
