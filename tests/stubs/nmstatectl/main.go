// Command nmstatectl is a strict stand-in for nmstate's nmstatectl 2.2.x at
// the process boundary, for machines where the real tool is not installable
// (docs/boot-simulation.md). It implements the CLI contract of nmstatectl for
// what the agent uses: version, gc, apply [--no-commit] [--timeout N]
// [--no-verify], commit, rollback, global -v/-q. It refuses unknown flags
// (exit 2, as clap does), malformed or non-nmstate YAML (exit 1,
// "NmstateError: InvalidArgument"), a non-integer --timeout (exit 65), and
// commit/rollback without a pending checkpoint (exit 1). It never touches
// the network.
//
// Environment:
//
//	NMSTATECTL_STUB_LOG     append one JSON line per call: {"args":[...],"stdin":"..."}
//	NMSTATECTL_STUB_STATE   file holding the pending checkpoint (needed by
//	                        apply --no-commit, commit, rollback)
//	NMSTATECTL_STUB_FAIL    comma list of subcommands that fail with exit 1
//	NMSTATECTL_STUB_HANG    comma list of subcommands that hang until killed
//	NMSTATECTL_STUB_VERSION version to report (default 2.2.37)
package main

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

const checkpoint = "/org/freedesktop/NetworkManager/Checkpoint/1"

type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usage(format string, a ...any) error {
	return &exitError{2, "error: " + fmt.Sprintf(format, a...)}
}

func nmErr(kind, format string, a ...any) error {
	return &exitError{1, "NmstateError: " + kind + ": " + fmt.Sprintf(format, a...)}
}

func main() {
	stdin, err := run(os.Args[1:])
	logCall(os.Args[1:], stdin)
	if err != nil {
		var ee *exitError
		code := 1
		if errors.As(err, &ee) {
			code = ee.code
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(code)
	}
}

func logCall(args []string, stdin []byte) {
	p := os.Getenv("NMSTATECTL_STUB_LOG")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub: log:", err)
		os.Exit(70)
	}
	defer f.Close()
	if args == nil {
		args = []string{}
	}
	line, _ := json.Marshal(struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin,omitempty"`
	}{args, string(stdin)})
	f.Write(append(line, '\n'))
}

func listed(env, sub string) bool {
	for _, s := range strings.Split(os.Getenv(env), ",") {
		if strings.TrimSpace(s) == sub {
			return true
		}
	}
	return false
}

// run returns what it read from stdin (for the call log) and the outcome.
func run(all []string) ([]byte, error) {
	args := all
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-q", "--quiet", "-v", "-vv", "-vvv", "--verbose":
			args = args[1:]
		default:
			return nil, usage("unexpected argument '%s' found", args[0])
		}
	}
	if len(args) == 0 {
		return nil, usage("a subcommand is required")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "a", "set":
		sub = "apply"
	}
	if listed("NMSTATECTL_STUB_HANG", sub) {
		var stdin []byte
		if sub == "apply" || sub == "gc" {
			stdin, _ = io.ReadAll(os.Stdin)
		}
		if sub == "apply" {
			// The real tool creates the checkpoint before it can hang.
			if err := setCheckpoint(true); err != nil {
				return stdin, err
			}
		}
		// Killed while hanging, main never logs: record the call now.
		logCall(all, stdin)
		fmt.Fprintln(os.Stderr, "[INFO  nmstate] stub: hanging as told")
		for {
			time.Sleep(time.Hour)
		}
	}
	if listed("NMSTATECTL_STUB_FAIL", sub) {
		// Fail before acting: a failed commit or rollback leaves the
		// checkpoint, a failed apply has rolled its own back.
		var stdin []byte
		if sub == "apply" || sub == "gc" {
			stdin, _ = io.ReadAll(os.Stdin)
		}
		if sub == "apply" {
			if err := setCheckpoint(false); err != nil {
				return stdin, err
			}
		}
		return stdin, nmErr("PluginFailure", "stub: %s failed as told", sub)
	}
	var stdin []byte
	var err error
	switch sub {
	case "version":
		if len(rest) != 0 {
			return nil, usage("unexpected argument '%s' found", rest[0])
		}
		v := os.Getenv("NMSTATECTL_STUB_VERSION")
		if v == "" {
			v = "2.2.37"
		}
		fmt.Printf("nmstatectl %s\n", v)
	case "gc":
		stdin, err = gc(rest)
	case "apply":
		stdin, err = apply(rest)
	case "commit", "rollback":
		err = finish(sub, rest)
	default:
		return nil, usage("unrecognized subcommand '%s'", sub)
	}
	return stdin, err
}

func readInput(files []string) ([]byte, error) {
	if len(files) == 0 || (len(files) == 1 && files[0] == "-") {
		return io.ReadAll(os.Stdin)
	}
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nmErr("InvalidArgument", "failed to read file %s: %v", f, err)
		}
		all = append(all, b...)
	}
	return all, nil
}

var topKeys = map[string]bool{"interfaces": true, "routes": true, "dns-resolver": true, "route-rules": true, "hostname": true, "ovs-db": true, "ovn": true}

// parseState is as strict as nmstate's deserialiser on what the agent sends.
func parseState(b []byte) (map[string]any, error) {
	var st map[string]any
	if err := yaml.Unmarshal(b, &st); err != nil {
		return nil, nmErr("InvalidArgument", "Provide file is not valid NetworkState or NetworkPolicy: %v", err)
	}
	if st == nil {
		return nil, nmErr("InvalidArgument", "Provide file is not valid NetworkState or NetworkPolicy: empty")
	}
	for k := range st {
		if !topKeys[k] {
			return nil, nmErr("InvalidArgument", "Provide file is not valid NetworkState or NetworkPolicy: unknown field `%s`", k)
		}
	}
	if v, ok := st["interfaces"]; ok {
		l, ok := v.([]any)
		if !ok {
			return nil, nmErr("InvalidArgument", "interfaces: invalid type, expected a sequence")
		}
		for i, it := range l {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, nmErr("InvalidArgument", "interfaces[%d]: expected a mapping", i)
			}
			if n, ok := m["name"].(string); !ok || n == "" {
				return nil, nmErr("InvalidArgument", "interfaces[%d]: missing field `name`", i)
			}
			for _, fam := range []string{"ipv4", "ipv6"} {
				ip, _ := m[fam].(map[string]any)
				addrs, _ := ip["address"].([]any)
				for _, a := range addrs {
					am, _ := a.(map[string]any)
					s, _ := am["ip"].(string)
					if !validIP(s) {
						return nil, nmErr("InvalidArgument", "Invalid IP address %q", s)
					}
				}
			}
		}
	}
	return st, nil
}

func validIP(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\n/") {
		return false
	}
	if strings.Contains(s, ":") {
		return strings.Count(s, "::") <= 1
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 {
			return false
		}
	}
	return true
}

func gc(args []string) ([]byte, error) {
	if len(args) != 1 {
		return nil, usage("gc takes exactly one state file or -")
	}
	if strings.HasPrefix(args[0], "-") && args[0] != "-" {
		return nil, usage("unexpected argument '%s' found", args[0])
	}
	b, err := readInput(args)
	if err != nil {
		return b, err
	}
	st, err := parseState(b)
	if err != nil {
		return b, err
	}
	out := map[string][][]string{"NetworkManager": keyfiles(st)}
	enc := yaml.NewEncoder(os.Stdout)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return b, &exitError{65, err.Error()}
	}
	return b, enc.Close()
}

func apply(args []string) ([]byte, error) {
	noCommit := false
	var files []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--no-commit":
			noCommit = true
		case a == "--no-verify":
		case a == "--timeout":
			if i+1 >= len(args) {
				return nil, usage("a value is required for '--timeout <TIMEOUT>'")
			}
			i++
			if _, err := strconv.ParseUint(args[i], 10, 32); err != nil {
				return nil, &exitError{65, fmt.Sprintf("NmstateError: InvalidArgument: invalid timeout %q", args[i])}
			}
		case a == "-" || !strings.HasPrefix(a, "-"):
			files = append(files, a)
		default:
			return nil, usage("unexpected argument '%s' found", a)
		}
	}
	b, err := readInput(files)
	if err != nil {
		return b, err
	}
	if _, err := parseState(b); err != nil {
		return b, err
	}
	if noCommit {
		if err := setCheckpoint(true); err != nil {
			return b, err
		}
		fmt.Fprintf(os.Stderr, "[INFO  nmstate::nm::query_apply::apply] Created checkpoint %s\n", checkpoint)
	}
	os.Stdout.Write(b)
	return b, nil
}

func finish(sub string, args []string) error {
	if len(args) > 1 {
		return usage("unexpected argument '%s' found", args[1])
	}
	if len(args) == 1 && (strings.HasPrefix(args[0], "-") || args[0] != checkpoint) {
		if strings.HasPrefix(args[0], "-") {
			return usage("unexpected argument '%s' found", args[0])
		}
		return nmErr("NotFoundError", "checkpoint %s not found", args[0])
	}
	pending, err := hasCheckpoint()
	if err != nil {
		return err
	}
	if !pending {
		return nmErr("PluginFailure", "no checkpoint to %s", sub)
	}
	if err := setCheckpoint(false); err != nil {
		return err
	}
	if len(args) == 1 {
		fmt.Println(args[0])
	} else {
		fmt.Println()
	}
	return nil
}

func statePath() (string, error) {
	p := os.Getenv("NMSTATECTL_STUB_STATE")
	if p == "" {
		return "", &exitError{70, "stub: NMSTATECTL_STUB_STATE is not set"}
	}
	return p, nil
}

func hasCheckpoint() (bool, error) {
	p, err := statePath()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	return err == nil, nil
}

func setCheckpoint(on bool) error {
	p, err := statePath()
	if err != nil {
		return err
	}
	if on {
		return os.WriteFile(p, []byte(checkpoint+"\n"), 0o600)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// keyfiles renders a NetworkManager keyfile per interface the way nmstate's
// gc lays them out (docs/apply.md): [connection] first, keys sorted in a
// section, address0/route0 numbering, uuid derived from name and type.
func keyfiles(st map[string]any) [][]string {
	ifaces, _ := st["interfaces"].([]any)
	routes, _ := st["routes"].(map[string]any)
	rlist, _ := routes["config"].([]any)
	dns, _ := st["dns-resolver"].(map[string]any)
	dconf, _ := dns["config"].(map[string]any)
	servers, _ := dconf["server"].([]any)
	dnsDone := false
	var out [][]string
	for _, it := range ifaces {
		m := it.(map[string]any)
		name := m["name"].(string)
		if m["state"] == "absent" {
			continue
		}
		typ, _ := m["type"].(string)
		nmType := map[string]string{"ethernet": "ethernet", "linux-bridge": "bridge", "bond": "bond", "vlan": "vlan", "dummy": "dummy", "": "ethernet"}[typ]
		if nmType == "" {
			nmType = typ
		}
		id := name
		if p, ok := m["profile-name"].(string); ok && p != "" {
			id = p
		}
		sum := sha256.Sum256([]byte(name + "\x00" + nmType))
		sum[6] = sum[6]&0x0f | 0x50
		sum[8] = sum[8]&0x3f | 0x80
		uuid := fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
		conn := map[string]string{"id": id, "interface-name": name, "type": nmType, "uuid": uuid}
		if m["state"] == "down" {
			conn["autoconnect"] = "false"
		}
		secs := []section{{"connection", conn}}
		if nmType == "ethernet" || nmType == "vlan" || nmType == "bridge" || nmType == "bond" || nmType == "dummy" {
			extra := map[string]string{}
			if v, ok := m["vlan"].(map[string]any); ok && nmType == "vlan" {
				extra["parent"] = fmt.Sprint(v["base-iface"])
				extra["id"] = fmt.Sprint(v["id"])
			}
			secs = append(secs, section{nmType, extra})
		}
		for _, fam := range []string{"ipv4", "ipv6"} {
			ip, _ := m[fam].(map[string]any)
			s := map[string]string{}
			enabled, _ := ip["enabled"].(bool)
			dhcp, _ := ip["dhcp"].(bool)
			if fam == "ipv6" {
				dhcp, _ = ip["autoconf"].(bool)
			}
			addrs, _ := ip["address"].([]any)
			switch {
			case !enabled:
				s["method"] = "disabled"
			case dhcp:
				s["method"] = "auto"
			default:
				s["method"] = "manual"
			}
			for i, a := range addrs {
				am := a.(map[string]any)
				s[fmt.Sprintf("address%d", i)] = fmt.Sprintf("%v/%v", am["ip"], am["prefix-length"])
			}
			n := 0
			for _, r := range rlist {
				rm, _ := r.(map[string]any)
				dst, _ := rm["destination"].(string)
				if rm["next-hop-interface"] != name || strings.Contains(dst, ":") != (fam == "ipv6") || !enabled {
					continue
				}
				v := fmt.Sprintf("%s,%v", dst, rm["next-hop-address"])
				if metric, ok := rm["metric"]; ok {
					v += fmt.Sprintf(",%v", metric)
				}
				s[fmt.Sprintf("route%d", n)] = v
				table := "254"
				if t, ok := rm["table-id"]; ok {
					table = fmt.Sprint(t)
				}
				s[fmt.Sprintf("route%d_options", n)] = "table=" + table
				n++
			}
			if !dnsDone && enabled && len(addrs) > 0 && len(servers) > 0 {
				var fs []string
				for _, sv := range servers {
					if strings.Contains(fmt.Sprint(sv), ":") == (fam == "ipv6") {
						fs = append(fs, fmt.Sprint(sv))
					}
				}
				if len(fs) > 0 {
					s["dns"] = strings.Join(fs, ";") + ";"
					dnsDone = true
				}
			}
			secs = append(secs, section{fam, s})
		}
		out = append(out, []string{id + ".nmconnection", render(secs)})
	}
	return out
}

type section struct {
	name string
	keys map[string]string
}

func render(secs []section) string {
	var b strings.Builder
	for i, s := range secs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n", s.name)
		keys := make([]string, 0, len(s.keys))
		for k, v := range s.keys {
			if v != "" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, s.keys[k])
		}
	}
	return b.String()
}
