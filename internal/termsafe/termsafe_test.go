package termsafe

import (
	"bytes"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"fleet-default":       "fleet-default",
		"école ünïcode":       "école ünïcode",
		"fleet\x1b]0;owned\a": `"fleet\x1b]0;owned\a"`,
		"\x1b[2J\x1b[H":       `"\x1b[2J\x1b[H"`,
		"two\nlines":          `"two\nlines"`,
		"tab\there":           `"tab\there"`,
		"cr\rover":            `"cr\rover"`,
		"c1\u009bcsi":         `"c1\u009bcsi"`,
		"del\x7f":             `"del\x7f"`,
		"bidi\u202eevil":      `"bidi\u202eevil"`,
		"not utf-8 \xff":      `"not utf-8 \xff"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"[connection]\nid=eth0\n\tindented\n": "[connection]\nid=eth0\n\tindented\n",
		"title \x1b]0;owned\a here\n":         `title \x1b]0;owned\a here` + "\n",
		"clear \x1b[2J\r\n":                   `clear \x1b[2J\r` + "\n",
		"bad \xff byte, ok é":                 `bad \xff byte, ok é`,
		"c1 \u009b and bidi \u2066":           `c1 \u009b and bidi \u2066`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

// A rune split across writes passes whole; an ESC split from its sequence
// is escaped all the same.
func TestWriterSplitWrites(t *testing.T) {
	var out bytes.Buffer
	w := &Writer{W: &out}
	in := []byte("é\x1b[2Jz")
	for i := range in {
		if n, err := w.Write(in[i : i+1]); n != 1 || err != nil {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	if got, want := out.String(), `é\x1b[2Jz`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
