package bootstrap

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustRange(t *testing.T, r Range) *addrRange {
	t.Helper()
	ar, err := parseRange("range", &r)
	if err != nil {
		t.Fatal(err)
	}
	return ar
}

func walked(r *addrRange, offset uint64) string {
	var out []string
	for a := range r.walk(offset) {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

func TestRangeWalkStartsAtOffsetAndWraps(t *testing.T) {
	r := mustRange(t, Range{Start: "10.0.0.10", End: "10.0.0.14", Prefix: 24})
	cases := map[uint64]string{
		0: "10.0.0.10 10.0.0.11 10.0.0.12 10.0.0.13 10.0.0.14",
		3: "10.0.0.13 10.0.0.14 10.0.0.10 10.0.0.11 10.0.0.12",
		// The offset is a 64-bit hash: it is taken modulo the range size.
		5 * 1000:   "10.0.0.10 10.0.0.11 10.0.0.12 10.0.0.13 10.0.0.14",
		5*1000 + 4: "10.0.0.14 10.0.0.10 10.0.0.11 10.0.0.12 10.0.0.13",
	}
	for off, want := range cases {
		if got := walked(r, off); got != want {
			t.Errorf("offset %d: %s, want %s", off, got, want)
		}
	}
}

func TestRangeWalkSkipsNetworkBroadcastGatewayAndExcluded(t *testing.T) {
	// A /29 spanned whole: .0 network, .7 broadcast, .1 gateway, .4 excluded.
	r := mustRange(t, Range{Start: "10.0.0.0", End: "10.0.0.7", Prefix: 29, Gateway: "10.0.0.1", Exclude: []string{"10.0.0.4"}})
	if got, want := walked(r, 6), "10.0.0.6 10.0.0.2 10.0.0.3 10.0.0.5"; got != want {
		t.Errorf("from .6: %s, want %s", got, want)
	}
	// Offsets that land on a skipped address move to the next usable one.
	if got, want := walked(r, 7), "10.0.0.2 10.0.0.3 10.0.0.5 10.0.0.6"; got != want {
		t.Errorf("from .7 (broadcast): %s, want %s", got, want)
	}
}

func TestRangePointToPointHasNoNetworkOrBroadcast(t *testing.T) {
	if got := walked(mustRange(t, Range{Start: "10.0.0.0", End: "10.0.0.1", Prefix: 31}), 0); got != "10.0.0.0 10.0.0.1" {
		t.Errorf("/31: %s", got)
	}
	if got := walked(mustRange(t, Range{Start: "10.0.0.9", End: "10.0.0.9", Prefix: 32}), 7); got != "10.0.0.9" {
		t.Errorf("/32: %s", got)
	}
}

func TestRangeWalkVisitsEveryUsableAddressOnce(t *testing.T) {
	r := mustRange(t, Range{Start: "192.168.0.250", End: "192.168.1.5", Prefix: 23, Gateway: "192.168.1.1"})
	want := "192.168.0.250 192.168.0.251 192.168.0.252 192.168.0.253 192.168.0.254 192.168.0.255 192.168.1.0 192.168.1.2 192.168.1.3 192.168.1.4 192.168.1.5"
	for off := range uint64(14) {
		var got []string
		for a := range r.walk(off) {
			got = append(got, a.String())
		}
		slices.SortFunc(got, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
		if strings.Join(got, " ") != want {
			t.Fatalf("offset %d visited %v", off, got)
		}
	}
}

// The start offset is the documented hash (docs/bootstrap.md): the first
// 8 bytes, big-endian, of SHA-256("nodereg-bootstrap" NUL identity).
func TestStartOffsetIsTheDocumentedHash(t *testing.T) {
	id := "uuid:4c4c4544-0042-3610-8052-b4c04f385631"
	h := sha256.Sum256(append([]byte("nodereg-bootstrap\x00"), id...))
	if got, want := startOffset(id), binary.BigEndian.Uint64(h[:]); got != want {
		t.Fatalf("startOffset = %d, want %d", got, want)
	}
}

// The point of the offset: a rack of machines booting one image at once
// starts at many different addresses, and each machine at the same one
// every boot.
func TestRangeStartSpreadsMachines(t *testing.T) {
	c := mustConfig(t, rangeFile) // 50 addresses
	starts := map[string]bool{}
	for i := range 200 {
		f := Facts{UUID: fmt.Sprintf("00000000-0000-4000-8000-%012x", i)}
		p, err := Preview(c, f)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Preview(c, f)
		if p.Choices[0].FirstTry != again.Choices[0].FirstTry {
			t.Fatalf("machine %d: first try %s then %s", i, p.Choices[0].FirstTry, again.Choices[0].FirstTry)
		}
		starts[p.Choices[0].FirstTry.String()] = true
	}
	// 200 uniform draws over 50 addresses leave about 1 address unused;
	// 40 is far below that and far above what a constant start gives.
	if len(starts) < 40 {
		t.Errorf("200 machines started at only %d of 50 addresses", len(starts))
	}
}

func TestPreviewRangeNeedsIdentity(t *testing.T) {
	_, err := Preview(mustConfig(t, rangeFile), Facts{})
	if err == nil || !strings.Contains(err.Error(), Key+".ipAddresses.boot-ip.range:") {
		t.Fatalf("machine without identity: %v", err)
	}
}

// Two placeholders drawing from one range never get the same address.
func TestTwoPlaceholdersShareARange(t *testing.T) {
	file := replace(t, rangeFile, `            - ip: "{boot-ip}"`, `            - ip: "{boot-ip}"
              prefix-length: 24
            - ip: "{extra-ip}"`)
	file = replace(t, file, "      ipAddresses:\n", "      ipAddresses:\n        extra-ip:\n          range: {start: 10.231.0.100, end: 10.231.0.149, prefix: 24}\n")
	c := mustConfig(t, file)
	for i := range 50 {
		p, err := Preview(c, Facts{UUID: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := p.Network.IPAddresses["boot-ip"], p.Network.IPAddresses["extra-ip"]; a == b {
			t.Fatalf("machine %d: both placeholders got %s", i, a)
		}
	}
}
