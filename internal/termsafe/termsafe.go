// Package termsafe keeps what a resource or a server wrote from acting on
// the terminal that prints it: an ESC sequence in a MachineRegistration's
// name sets the window title or clears the screen; a CR or a bidi
// override makes a line show something else than it holds. The agent
// prints such strings escaped as Go's %q does (docs/reliability.md).
package termsafe

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// unsafeRune is what acts on a terminal: a control character (C0, DEL,
// C1), a bidi control, or a byte that is not UTF-8 (utf8.RuneError of
// width 1).
func unsafeRune(r rune, width int) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || (r == utf8.RuneError && width == 1)
}

// Quote is s as it is when nothing in it acts on a terminal, else s
// quoted and escaped as %q does. For one value on a line (a name, a
// path): a newline or a tab counts too.
func Quote(s string) string {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, w) {
			return strconv.Quote(s)
		}
		i += w
	}
	return s
}

// Text is s, a text of lines (a file's content, a log line), with what
// acts on a terminal escaped in place as %q escapes it, newlines and tabs
// kept.
func Text(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' || r == '\t' || !unsafeRune(r, w):
			b.WriteString(s[i : i+w])
		case r == utf8.RuneError:
			b.WriteString(strings.Trim(strconv.Quote(s[i:i+1]), `"`))
		default:
			b.WriteString(strings.Trim(strconv.QuoteRune(r), `'`))
		}
		i += w
	}
	return b.String()
}

// Writer writes through W what it is given, as Text: a command's stdout
// and stderr, so that nothing the agent prints can act on the terminal,
// whichever path printed it. A UTF-8 sequence split across two writes is
// held until it is whole.
type Writer struct {
	W       io.Writer
	pending []byte
}

func (t *Writer) Write(p []byte) (int, error) {
	b := append(t.pending, p...)
	t.pending = nil
	// Hold an incomplete sequence at the end (at most 3 bytes) for the
	// next write.
	for k := 1; k <= 3 && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				t.pending = append([]byte(nil), b[len(b)-k:]...)
				b = b[:len(b)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(t.W, Text(string(b))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes, escaped, what an incomplete sequence held back.
func (t *Writer) Flush() {
	if len(t.pending) > 0 {
		_, _ = io.WriteString(t.W, Text(string(t.pending)))
		t.pending = nil
	}
}
