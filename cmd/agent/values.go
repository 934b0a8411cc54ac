package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/apply"
)

// choice is a flag whose value must be one of a few words; a wrong value
// is refused while parsing (exit 64), before any run starts.
type choice struct {
	value   string
	allowed []string
}

func newChoice(def string, allowed ...string) *choice {
	return &choice{value: def, allowed: allowed}
}

func (c *choice) String() string { return c.value }
func (c *choice) Type() string   { return strings.Join(c.allowed, "|") }
func (c *choice) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("%q is not one of %s", v, strings.Join(c.allowed, ", "))
	}
	c.value = v
	return nil
}

// newNmstateChoice is --nmstate: what writes an nmstate config's keyfiles.
func newNmstateChoice() *choice {
	allowed := make([]string, len(apply.NmstateChoices))
	for i, c := range apply.NmstateChoices {
		allowed[i] = string(c)
	}
	return newChoice(string(apply.NmstateAuto), allowed...)
}

const nmstateUsage = "what writes an nmstate config's keyfiles: auto (nmstatectl gc when found, else the built-in translator), builtin (applied live as keyfiles) or nmstatectl (applied live by nmstatectl)"

// labelList is --label k=v, repeatable or comma-separated (upstream's
// syntax). Each pair is checked as it is parsed.
type labelList []string

func (l *labelList) String() string { return strings.Join(*l, ",") }
func (l *labelList) Type() string   { return "key=value" }
func (l *labelList) Set(v string) error {
	for _, pair := range strings.Split(v, ",") {
		k, _, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q: want key=value", pair)
		}
	}
	*l = append(*l, v)
	return nil
}

// tpmDevice is a device path or unix:///path (swtpm's socket).
type tpmDevice string

func (d *tpmDevice) String() string { return string(*d) }
func (d *tpmDevice) Type() string   { return "path" }
func (d *tpmDevice) Set(v string) error {
	if !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "unix:///") {
		return fmt.Errorf("%q is neither a device path nor unix:///path", v)
	}
	*d = tpmDevice(v)
	return nil
}
