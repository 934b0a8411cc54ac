package state

import (
	"reflect"
	"testing"
)

func TestParseAddresses(t *testing.T) {
	got := ParseAddresses("eth0=10.0.0.5/24,fd00::5/64;eth1=10.1.0.5/16")
	if len(got["eth0"]) != 2 || got["eth0"][1] != "fd00::5/64" || got["eth1"][0] != "10.1.0.5/16" {
		t.Errorf("got %v", got)
	}
	for _, s := range []string{"", ";", "=10.0.0.5/24", "eth0=", "eth0"} {
		if got := ParseAddresses(s); len(got) != 0 {
			t.Errorf("ParseAddresses(%q) = %v, want none", s, got)
		}
	}
}

// The encoding the state file and the annotations carry, written by hand
// as docs/annotations.md shows it.
func TestFormatAddresses(t *testing.T) {
	m := map[string][]string{"eth1": {"10.1.0.5/16"}, "eth0": {"10.0.0.5/24", "fd00::5/64"}}
	const want = "eth0=10.0.0.5/24,fd00::5/64;eth1=10.1.0.5/16"
	if got := FormatAddresses(m); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if back := ParseAddresses(want); !reflect.DeepEqual(back, m) {
		t.Errorf("round trip: %v", back)
	}
}
