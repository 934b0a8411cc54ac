// Package labeltmpl renders elemental's `${Family/Path}` templates (machine
// names, inventory labels) over the data a machine sent: the SMBIOS map and
// the system-data label map merged, plus the Random family (docs/regserver.md,
// The config file).
package labeltmpl

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var varRE = regexp.MustCompile(`\$\{([^{}]*)\}`)

// ErrNoValue is the error of a variable the machine's data has no string
// value for: upstream then falls back (machine names) or skips (labels),
// where any other error fails the registration.
var ErrNoValue = errors.New("no value")

// IsRandom reports whether tmpl uses the Random family: upstream renders
// such a label once and keeps it at later registrations.
func IsRandom(tmpl string) bool {
	for _, m := range varRE.FindAllStringSubmatch(tmpl, -1) {
		if strings.HasPrefix(strings.TrimSpace(m[1]), "Random/") {
			return true
		}
	}
	return false
}

// Data merges top-level keys of the maps in order, later maps winning, as
// the server merges SMBIOS then system data into one template tree.
func Data(maps ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Render replaces every ${A/B/C} in tmpl. Only string leaves resolve; a
// variable that names nothing, or a non-string, is an error naming it.
// rnd feeds the Random family; nil means crypto/rand.
func Render(tmpl string, data map[string]any, rnd io.Reader) (string, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var firstErr error
	out := varRE.ReplaceAllStringFunc(tmpl, func(m string) string {
		path := strings.TrimSpace(m[2 : len(m)-1])
		v, err := lookup(path, data, rnd)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("template variable ${%s}: %w", path, err)
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// Check reports a template that can never render, whatever a machine
// sends: an unknown or malformed Random variable, an empty path element, or
// a "${" left unclosed. Variables naming machine data are not checked: a
// machine may or may not send them.
func Check(tmpl string) error {
	for _, m := range varRE.FindAllStringSubmatch(tmpl, -1) {
		path := strings.TrimSpace(m[1])
		parts := strings.Split(path, "/")
		if parts[0] == "Random" {
			if _, err := random(parts[1:], zeroReader{}); err != nil {
				return fmt.Errorf("template variable ${%s}: %w", path, err)
			}
			continue
		}
		if slices.Contains(parts, "") {
			return fmt.Errorf("template variable ${%s}: empty path element", path)
		}
	}
	if strings.Contains(varRE.ReplaceAllString(tmpl, ""), "${") {
		return fmt.Errorf("template %q: \"${\" without a matching \"}\"", tmpl)
	}
	return nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func lookup(path string, data map[string]any, rnd io.Reader) (string, error) {
	parts := strings.Split(path, "/")
	if parts[0] == "Random" {
		return random(parts[1:], rnd)
	}
	var cur any = data
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%w: %q is not reachable, a parent is not a map", ErrNoValue, p)
		}
		cur, ok = m[p]
		if !ok {
			return "", fmt.Errorf("%w at %q", ErrNoValue, p)
		}
	}
	s, ok := cur.(string)
	if !ok {
		return "", fmt.Errorf("%w: the value is a %T, not a string", ErrNoValue, cur)
	}
	return s, nil
}

func random(parts []string, rnd io.Reader) (string, error) {
	switch {
	case len(parts) == 1 && parts[0] == "UUID":
		var b [16]byte
		if _, err := io.ReadFull(rnd, b[:]); err != nil {
			return "", err
		}
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		h := hex.EncodeToString(b[:])
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
	case len(parts) == 2 && parts[0] == "Hex":
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 || n > 32 {
			return "", fmt.Errorf("hex length %q not in 1..32", parts[1])
		}
		b := make([]byte, (n+1)/2)
		if _, err := io.ReadFull(rnd, b); err != nil {
			return "", err
		}
		return hex.EncodeToString(b)[:n], nil
	case len(parts) == 2 && parts[0] == "Int":
		max, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || max < 1 {
			return "", fmt.Errorf("int bound %q is not a positive integer", parts[1])
		}
		n, err := rand.Int(rnd, big.NewInt(max))
		if err != nil {
			return "", err
		}
		return n.String(), nil
	}
	return "", fmt.Errorf("unknown Random variable")
}

// SanitizeName turns a rendered machine name into a Kubernetes-style object
// name: lower case, [0-9a-z.-] only (others become '-'), alphanumeric at
// both ends, at most 253 characters.
func SanitizeName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-.")
	if len(out) > 253 {
		out = strings.TrimRight(out[:253], "-.")
	}
	return out
}

var dashes = regexp.MustCompile(`-+`)

// SanitizeLabelValue follows upstream: characters outside [0-9a-zA-Z._]
// become '-', runs of '-' collapse, non-alphanumerics are trimmed at both
// ends, and the value is cut to 58 characters.
func SanitizeLabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(isAlnum(c) || c == '.' || c == '_') {
			b[i] = '-'
		}
	}
	out := dashes.ReplaceAllString(string(b), "-")
	out = strings.TrimFunc(out, func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
	if len(out) > 58 {
		out = out[:58]
		out = strings.TrimRightFunc(out, func(r rune) bool { return !isAlnum(byte(r)) })
	}
	return out
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
