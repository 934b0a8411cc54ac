package apply

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// ParseKeyfile checks that text is a NetworkManager keyfile in the ini
// dialect NetworkManager reads (nm-settings-keyfile(5)): [section] headers,
// key=value lines, # or ; comments, blank lines, a [connection] section with
// an id or a type. It returns a *FieldError naming path and the line.
func ParseKeyfile(path string, text []byte) error {
	_, err := parseKeyfile(path, text)
	return err
}

// keyfileSections maps section -> key -> value of a keyfile.
type keyfileSections map[string]map[string]string

func parseKeyfile(path string, text []byte) (keyfileSections, error) {
	secs := keyfileSections{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case line[0] == '[':
			if !strings.HasSuffix(line, "]") || len(line) < 3 || strings.ContainsAny(line[1:len(line)-1], "[]") {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: malformed section header %q", n, line)}
			}
			cur = line[1 : len(line)-1]
			if secs[cur] == nil {
				secs[cur] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: not a key=value pair", n)}
			}
			if cur == "" {
				return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile line %d: key %q before any section", n, k)}
			}
			secs[cur][k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &FieldError{Path: path, Reason: fmt.Sprintf("keyfile: %v", err)}
	}
	c, ok := secs["connection"]
	if !ok {
		return nil, &FieldError{Path: path, Reason: "keyfile has no [connection] section"}
	}
	if c["id"] == "" && c["type"] == "" {
		return nil, &FieldError{Path: path, Reason: "keyfile [connection] has neither id nor type"}
	}
	return secs, nil
}
