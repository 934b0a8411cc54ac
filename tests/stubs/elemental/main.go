// Command elemental is a stand-in for the elemental toolkit's CLI at the
// process boundary, for the agent's install and reset tests: it accepts
// `[--debug] [--config-dir D] install|reset`, records its arguments, its
// ELEMENTAL_* environment and the hooks it finds, and exits 0. It checks
// what the toolkit itself would refuse: an unknown verb or flag, and a
// missing ELEMENTAL_CLOUD_INIT_PATHS.
//
// Environment:
//
//	ELEMENTAL_STUB_LOG   append one JSON line per call
//	ELEMENTAL_STUB_ROOT  prefix for ELEMENTAL_CLOUD_INIT_PATHS (scratch roots)
//	ELEMENTAL_STUB_FAIL  non-empty: exit 1 after recording
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type call struct {
	Args  []string          `json:"args"`
	Verb  string            `json:"verb"`
	Env   map[string]string `json:"env"`
	Hooks map[string]string `json:"hooks"`
}

func main() {
	c, err := parse(os.Args[1:])
	if err == nil {
		c.Hooks, err = hooks()
	}
	if p := os.Getenv("ELEMENTAL_STUB_LOG"); p != "" {
		if f, ferr := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); ferr == nil {
			json.NewEncoder(f).Encode(c)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "elemental:", err)
		os.Exit(2)
	}
	if os.Getenv("ELEMENTAL_STUB_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "elemental: failing as told")
		os.Exit(1)
	}
}

func parse(args []string) (call, error) {
	c := call{Args: args, Env: map[string]string{}}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "ELEMENTAL_") && !strings.HasPrefix(k, "ELEMENTAL_STUB_") {
			c.Env[k] = v
		}
	}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--debug":
		case "--config-dir":
			if i+1 == len(args) {
				return c, fmt.Errorf("--config-dir needs a value")
			}
			i++
		case "install", "reset":
			if c.Verb != "" {
				return c, fmt.Errorf("two verbs: %s and %s", c.Verb, a)
			}
			c.Verb = a
		default:
			return c, fmt.Errorf("unknown argument %q", a)
		}
	}
	if c.Verb == "" {
		return c, fmt.Errorf("no verb (install or reset)")
	}
	if c.Env["ELEMENTAL_CLOUD_INIT_PATHS"] == "" {
		return c, fmt.Errorf("ELEMENTAL_CLOUD_INIT_PATHS is not set")
	}
	return c, nil
}

// hooks reads the yip files in the cloud-init paths, as the toolkit would.
func hooks() (map[string]string, error) {
	out := map[string]string{}
	for _, dir := range strings.Split(os.Getenv("ELEMENTAL_CLOUD_INIT_PATHS"), ",") {
		full := filepath.Join(os.Getenv("ELEMENTAL_STUB_ROOT"), dir)
		ents, err := os.ReadDir(full)
		if err != nil {
			return nil, fmt.Errorf("cloud-init path %s: %w", dir, err)
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(full, n))
			if err != nil {
				return nil, err
			}
			out[filepath.Join(dir, n)] = string(b)
		}
	}
	return out, nil
}
