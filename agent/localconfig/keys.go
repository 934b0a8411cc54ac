package localconfig

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/editdist"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// UnknownKey is a key of the config file that the agent does not read:
// upstream ignores those silently, so a typo (tpm_device, netwrk-config)
// would silently change nothing.
type UnknownKey struct {
	File    string
	Key     string // dotted path, e.g. elemental.registration.tpm_device
	Line    int
	Closest string // the closest known key at that level, "" if none is close
}

func (u UnknownKey) String() string {
	s := fmt.Sprintf("%s:%d: unknown key %s: ignored", u.File, u.Line, u.Key)
	if u.Closest != "" {
		s += fmt.Sprintf(" (did you mean %s?)", u.Closest)
	}
	return s
}

// unknownKeys walks the YAML document against protocol.Config's fields.
// Maps of free-form content (labels, cloud-config, raw values) are not
// checked: any key is valid there.
func unknownKeys(file string, doc *yaml.Node) []UnknownKey {
	if len(doc.Content) == 0 {
		return nil
	}
	var out []UnknownKey
	walkKeys(file, "", doc.Content[0], reflect.TypeOf(protocol.Config{}), &out)
	return out
}

var rawValueType = reflect.TypeOf(protocol.RawValue{})

// readElsewhere are keys of the config file that protocol.Config does not
// hold because another package reads them, and refuses its own unknown
// keys below them (bootstrap: the local bootstrap network), or because
// they are local only (NmstateKey).
var readElsewhere = []string{bootstrap.Key, NmstateKey, netpolicy.Key}

func walkKeys(file, prefix string, n *yaml.Node, t reflect.Type, out *[]UnknownKey) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawValueType:
		return
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, c := range n.Content {
			walkKeys(file, fmt.Sprintf("%s[%d]", prefix, i), c, t.Elem(), out)
		}
		return
	case t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode:
		return
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		fields[name] = f.Type
		names = append(names, name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		ft, ok := fields[k.Value]
		if !ok && slices.Contains(readElsewhere, path) {
			continue
		}
		if !ok {
			u := UnknownKey{File: file, Key: path, Line: k.Line}
			if c := closest(k.Value, names); c != "" {
				u.Closest = c
				if prefix != "" {
					u.Closest = prefix + "." + c
				}
			}
			*out = append(*out, u)
			continue
		}
		walkKeys(file, path, v, ft, out)
	}
}

// closest is the known name nearest to key by edit distance (after
// treating _ as -), if it is near enough to be a likely typo.
func closest(key string, names []string) string {
	norm := strings.ToLower(strings.ReplaceAll(key, "_", "-"))
	best, bestD := "", -1
	for _, n := range names {
		d := editdist.Levenshtein(norm, strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD < 0 || bestD > max(2, len(key)/3) {
		return ""
	}
	return best
}
