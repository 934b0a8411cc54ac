package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// setUserData puts gc's [user] keys (nmstate.interface.description) on the
// profile as nmstate does, in NetworkManager's "user" setting. nmcli has no
// "user" setting, so it goes over D-Bus: the profile's settings as
// GetSettings gives them, with "user" added, back through Update2 (flags
// 0: the profile stays where it is stored, /etc or /run).
func (l *liveBackend) setUserData(uuid string, kf []byte) error {
	kvs := keyfileSection(kf, "user")
	if len(kvs) == 0 {
		return nil
	}
	out, err := l.busctl("call", nmService, nmPath+"/Settings", nmService+".Settings", "GetConnectionByUuid", "s", uuid)
	if err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	m := settingsPath.FindStringSubmatch(out)
	if m == nil {
		return nmErr("Bug", "stub: GetConnectionByUuid answered %q", out)
	}
	conn := m[1]
	out, err = l.busctl("--json=short", "call", nmService, conn, nmService+".Settings.Connection", "GetSettings")
	if err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	var reply struct {
		Data []map[string]map[string]json.RawMessage `json:"data"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&reply); err != nil || len(reply.Data) != 1 {
		return nmErr("Bug", "stub: GetSettings answered %q: %v", out, err)
	}
	settings := reply.Data[0]
	data := map[string]string{}
	for _, kv := range kvs {
		data[kv[0]] = kv[1]
	}
	b, _ := json.Marshal(map[string]any{"type": "a{ss}", "data": data})
	settings["user"] = map[string]json.RawMessage{"data": b}
	args := []string{"call", nmService, conn, nmService + ".Settings.Connection", "Update2", "a{sa{sv}}ua{sv}"}
	enc, err := busArgs("a{sa{sv}}", settings)
	if err != nil {
		return nmErr("Bug", "stub: re-encoding the settings: %v", err)
	}
	args = append(append(args, enc...), "0", "0")
	if _, err := l.busctl(args...); err != nil {
		return nmErr("Bug", "stub: %v", err)
	}
	return nil
}

// busArgs writes value v (as busctl --json gives it) of D-Bus type sig as
// busctl call's arguments.
func busArgs(sig string, v any) ([]string, error) {
	if raw, ok := v.(json.RawMessage); ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return nil, err
		}
		v = x
	}
	switch sig[0] {
	case 'a':
		elem := sig[1:]
		if elem[0] == '{' {
			kt, vt := elem[1:2], elem[2:len(elem)-1]
			var keys []string
			m := map[string]any{}
			switch mv := v.(type) {
			case map[string]any:
				m = mv
			case map[string]map[string]json.RawMessage:
				for k, x := range mv {
					m[k] = x
				}
			case map[string]json.RawMessage:
				for k, x := range mv {
					m[k] = x
				}
			default:
				return nil, fmt.Errorf("%s: not a dict: %T", sig, v)
			}
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := []string{fmt.Sprint(len(keys))}
			for _, k := range keys {
				ka, err := busArgs(kt, k)
				if err != nil {
					return nil, err
				}
				va, err := busArgs(vt, m[k])
				if err != nil {
					return nil, err
				}
				out = append(append(out, ka...), va...)
			}
			return out, nil
		}
		l, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: not an array: %T", sig, v)
		}
		out := []string{fmt.Sprint(len(l))}
		for _, e := range l {
			ea, err := busArgs(elem, e)
			if err != nil {
				return nil, err
			}
			out = append(out, ea...)
		}
		return out, nil
	case '(':
		l, ok := v.([]any)
		fields := splitTypes(sig[1 : len(sig)-1])
		if !ok || len(l) != len(fields) {
			return nil, fmt.Errorf("%s: not a struct of %d: %v", sig, len(fields), v)
		}
		var out []string
		for i, f := range fields {
			fa, err := busArgs(f, l[i])
			if err != nil {
				return nil, err
			}
			out = append(out, fa...)
		}
		return out, nil
	case 'v':
		m, ok := v.(map[string]any)
		t, _ := m["type"].(string)
		if !ok || t == "" {
			return nil, fmt.Errorf("variant without its type: %v", v)
		}
		da, err := busArgs(t, m["data"])
		return append([]string{t}, da...), err
	}
	return []string{fmt.Sprint(v)}, nil
}

// splitTypes splits a signature into its complete types.
func splitTypes(sig string) []string {
	var out []string
	for len(sig) > 0 {
		n := typeLen(sig)
		out = append(out, sig[:n])
		sig = sig[n:]
	}
	return out
}

func typeLen(sig string) int {
	switch sig[0] {
	case 'a':
		return 1 + typeLen(sig[1:])
	case '(', '{':
		depth := 0
		for i := 0; i < len(sig); i++ {
			switch sig[i] {
			case '(', '{':
				depth++
			case ')', '}':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	}
	return 1
}
