package editdist

import "testing"

// Each distance counted by hand; the measure is symmetric.
func TestEditDistance(t *testing.T) {
	for pair, d := range map[[2]string]int{
		{"", ""}:                    0,
		{"abc", "abc"}:              0,
		{"tpm-devce", "tpm-device"}: 1,
		{"kitten", "sitting"}:       3,
		{"", "abc"}:                 3,
		{"flaw", "lawn"}:            2,
		{"url", "ulr"}:              2,
		{"Debug", "debug"}:          1,
	} {
		a, b := pair[0], pair[1]
		if got := Levenshtein(a, b); got != d {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", a, b, got, d)
		}
		if got := Levenshtein(b, a); got != d {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", b, a, got, d)
		}
	}
}
