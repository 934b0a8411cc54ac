package editdist

import "testing"

// Each distance counted by hand; the measure is symmetric.
func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{"tpm-devce", "tpm-device", 1},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
		{"flaw", "lawn", 2},
		{"url", "ulr", 2},
		{"Debug", "debug", 1},
	} {
		if got := Levenshtein(c.a, c.b); got != c.d {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
		if got := Levenshtein(c.b, c.a); got != c.d {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", c.b, c.a, got, c.d)
		}
	}
}
