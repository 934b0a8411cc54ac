package vectors

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
)

// captured are the SHA-256 sums of upstream's captures as they were copied
// in (from the shared reference, commit 57608bff of the capture), so a copy
// edited by hand, or a capture added without its sum, fails here; no test
// reads outside the repository.
var captured = map[string]string{
	"upstream-annotations.json":       "c14fe79179a2107a5ca850f2c0482c911211d9c915d8990b04bad2aee11c0b95",
	"upstream-msgconfig-network.yaml": "5108ee0a63619d8992096d0e4ad8b6fdf3abe540e31286e3599b97f640431cbc",
	"upstream-smbios.json":            "8c2177ab7d5abacfc446a9216398021e57088cbd2208a2ce1f3bb400df3adcce",
	"upstream-systemdatav2.json":      "752b9ca8403b5c1a776fc14ca2ce92e4e64919930f4e000c395ab637a16fd21b",
}

// The copies are the captures, byte for byte, and every capture is listed.
func TestCopiesAreTheCaptures(t *testing.T) {
	ents, err := os.ReadDir(Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "upstream-") {
			names = append(names, e.Name())
		}
	}
	var want []string
	for name, sum := range captured {
		want = append(want, name)
		got := sha256.Sum256(Read(t, name))
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("tests/vectors/%s is not the capture that was copied (sha256 %x, want %s)", name, got, sum)
		}
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("captures in tests/vectors %v, with recorded sums %v", names, want)
	}
}
