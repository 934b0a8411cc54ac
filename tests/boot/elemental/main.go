// Command elemental is a stand-in for elemental-toolkit's CLI in the boot
// simulation: the agent's --reset ends by running `elemental reset`, which
// on a node reformats partitions and reboots. Here it only records how it
// was called and succeeds, so the test can check the arguments and the
// environment and then simulate the reset itself.
//
// ELEMENTAL_STUB_LOG names the file that receives one JSON line per call:
// {"args": [...], "env": {"ELEMENTAL_...": "..."}}. Only ELEMENTAL_* variables
// are recorded: the rest of the environment is the caller's business.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	if err := record(os.Getenv("ELEMENTAL_STUB_LOG"), os.Args[1:], os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "elemental stand-in:", err)
		os.Exit(1)
	}
}

func record(path string, args, environ []string) error {
	if path == "" {
		return fmt.Errorf("ELEMENTAL_STUB_LOG is not set")
	}
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ELEMENTAL_") && k != "ELEMENTAL_STUB_LOG" {
			env[k] = v
		}
	}
	line, err := json.Marshal(struct {
		Args []string          `json:"args"`
		Env  map[string]string `json:"env"`
	}{args, env})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the call log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing the call log: %w", err)
	}
	return f.Close()
}
