package localconfig

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/protocol"
)

// docRow is one row of docs/config.md's key table.
type docRow struct{ key, setBy, localOnly string }

// configDocRows are the rows of the "## Keys" table of docs/config.md.
func configDocRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Keys\n")
	if !ok {
		t.Fatal(`docs/config.md has no "## Keys" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var rows []docRow
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		c := strings.Split(line, "|")
		if len(c) != 7 {
			t.Fatalf("docs/config.md: a row without five columns: %s", line)
		}
		rows = append(rows, docRow{strings.Trim(strings.TrimSpace(c[1]), "`"), strings.TrimSpace(c[4]), strings.TrimSpace(c[5])})
	}
	return rows
}

// parsedKeys are the key paths the parser reads: protocol.Config's fields
// as walkKeys sees them (a list's elements as "[]", maps and raw values
// as leaves), and the keys other packages read (readElsewhere).
func parsedKeys() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
			walk(prefix+"[]", t.Elem())
			return
		}
		if t.Kind() != reflect.Struct || t == rawValueType {
			return
		}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := strings.TrimPrefix(prefix+"."+name, ".")
			ft := t.Field(i).Type
			// A section of further keys is listed only when it is a value
			// of its own (a pointer: present or not), as in the table.
			if ft.Kind() != reflect.Struct {
				out = append(out, p)
			}
			walk(p, ft)
		}
	}
	walk("", reflect.TypeOf(protocol.Config{}))
	out = append(out, readElsewhere...)
	slices.Sort(out)
	return out
}

// TestConfigDocListsEveryKey: docs/config.md's table lists exactly the keys
// the parser reads, and says "local only: yes" of exactly those a server
// cannot set: KeepLocal undoes a server's value for them, or no server
// reply can carry them (readElsewhere). Only elemental.registration's keys
// may come from a drop-in.
func TestConfigDocListsEveryKey(t *testing.T) {
	rows := configDocRows(t)
	var doc []string
	for _, r := range rows {
		doc = append(doc, r.key)
	}
	slices.Sort(doc)
	code := parsedKeys()
	for _, k := range code {
		if !slices.Contains(doc, k) {
			t.Errorf("the parser reads %s; docs/config.md's table does not list it", k)
		}
	}
	for _, k := range doc {
		if !slices.Contains(code, k) {
			t.Errorf("docs/config.md lists %s; the parser does not read it", k)
		}
	}
	for _, r := range rows {
		reg := strings.HasPrefix(r.key, "elemental.registration.")
		if strings.Contains(r.setBy, "drop-in") != reg {
			t.Errorf("docs/config.md: %s set by %q: drop-ins set exactly the elemental.registration keys", r.key, r.setBy)
		}
		want := "no"
		switch name := strings.TrimPrefix(r.key, "elemental.registration."); {
		case slices.Contains(readElsewhere, r.key):
			want = "yes"
		case reg:
			want = serverValueKept(t, name)
		}
		if got, _, _ := strings.Cut(r.localOnly, ":"); got != want {
			t.Errorf("docs/config.md: %s local only %q, want %s", r.key, r.localOnly, want)
		}
		if (want == "yes") == strings.Contains(r.setBy, "server") {
			t.Errorf("docs/config.md: %s set by %q, local only %s", r.key, r.setBy, want)
		}
	}
}

// serverValueKept decodes a server reply setting elemental.registration.name
// to a value of its type onto a local config and runs KeepLocal: "yes"
// when the local value stays, "no" when the server's is taken, "partly"
// when a plain value is refused and an acceptable one taken (url, ca-cert).
func serverValueKept(t *testing.T, name string) string {
	t.Helper()
	field, ok := registrationField(name)
	if !ok {
		t.Fatalf("no field for elemental.registration.%s", name)
	}
	plain := map[reflect.Kind]string{reflect.String: "server-value", reflect.Bool: "true", reflect.Int64: "7", reflect.Map: "{from: server}"}[field.Type.Kind()]
	acceptable := map[string]string{
		"url":     "https://other.example/elemental/registration/t2",
		"ca-cert": fmt.Sprintf("%q", localPEM),
	}
	taken := func(v string) bool {
		local := protocol.Config{}
		merged := local
		reply := "elemental:\n  registration:\n    " + name + ": " + v + "\n"
		if _, err := protocol.DecodeConfigReply([]byte(reply), &merged); err != nil {
			t.Fatalf("%s: %v", reply, err)
		}
		KeepLocal(local, &merged)
		return !reflect.DeepEqual(local.Elemental.Registration, merged.Elemental.Registration)
	}
	switch plainTaken := taken(plain); {
	case plainTaken:
		return "no"
	case acceptable[name] != "" && taken(acceptable[name]):
		return "partly"
	}
	return "yes"
}

func registrationField(name string) (reflect.StructField, bool) {
	t := reflect.TypeOf(protocol.Registration{})
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); n == name {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}
