package apply

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodereg/nodereg/protocol"
)

// keyfiles renders the nmconnections config: connection name -> keyfile
// text, placeholders substituted per value.
func (r *renderer) keyfiles(conf map[string]protocol.RawValue) ([]Keyfile, error) {
	var kfs []Keyfile
	seen := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(conf)) {
		path := "config." + key
		if err := checkKey(path, key); err != nil {
			return nil, err
		}
		name := key
		if !strings.HasSuffix(name, keyfileSuffix) {
			name += keyfileSuffix
		}
		if err := checkFileName(path, name); err != nil {
			return nil, err
		}
		if prev, dup := seen[name]; dup {
			return nil, &FieldError{Path: path, Reason: fmt.Sprintf("same keyfile name as config.%s", prev)}
		}
		seen[name] = key
		text, ok := conf[key].Value.(string)
		if !ok {
			return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile must be text, got %T", conf[key].Value)}
		}
		if err := checkText(path, text, true); err != nil {
			return nil, err
		}
		out, _, err := r.substitute(path, text)
		if err != nil {
			return nil, err
		}
		if err := checkKeyfile(path, []byte(out)); err != nil {
			return nil, err
		}
		if !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		kfs = append(kfs, Keyfile{Name: name, Content: []byte(out)})
	}
	return kfs, nil
}

// checkKey refuses keys that could carry a substitution or a template: the
// tree's structure is the server's template and must not depend on addresses.
func checkKey(path, key string) error {
	if placeholderRE().MatchString(key) || strings.ContainsAny(key, "{}") {
		return &FieldError{Path: path, Reason: "placeholder or brace in a key"}
	}
	return checkText(path, key, false)
}

// checkText refuses yip template delimiters (generated content is rendered
// by yip's text/template) and control characters; multiline allows the
// newlines and tabs of keyfile text.
func checkText(path, s string, multiline bool) error {
	if strings.Contains(s, "{{") {
		return &FieldError{Path: path, Reason: "contains a template delimiter {{"}
	}
	for _, c := range s {
		if c == '\n' || c == '\t' {
			if multiline {
				continue
			}
		}
		if c < 0x20 || c == 0x7f {
			return &FieldError{Path: path, Reason: fmt.Sprintf("contains control character %q", c)}
		}
	}
	return nil
}

// checkFileName keeps a keyfile name inside the keyfile directory and out of
// the names the agent uses for temporary files.
func checkFileName(path, name string) error {
	switch {
	case name == "" || name == keyfileSuffix:
		return &FieldError{Path: path, Reason: "empty keyfile name"}
	case strings.ContainsAny(name, `/\`) || strings.ContainsRune(name, 0):
		return &FieldError{Path: path, Reason: fmt.Sprintf("keyfile name %q would leave the keyfile directory", name)}
	case strings.HasPrefix(name, "."):
		return &FieldError{Path: path, Reason: fmt.Sprintf("keyfile name %q starts with a dot", name)}
	case len(name) > 255:
		return &FieldError{Path: path, Reason: "keyfile name longer than 255 bytes"}
	}
	return checkText(path, name, false)
}
