package apply

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Tools is the one table of external programs this package runs. Each entry
// is a name looked up in PATH or an absolute path; ToolsFromEnv lets images
// and tests point them elsewhere (STYLE.md 4).
type Tools struct {
	Nmstatectl string // NODEREG_NMSTATECTL
	Nmcli      string // NODEREG_NMCLI
	Nmc        string // NODEREG_NMC (nm-configurator)
	Systemctl  string // NODEREG_SYSTEMCTL
	Elemental  string // NODEREG_ELEMENTAL (the toolkit's installer, for install/reset)
}

// Environment variables that override the tool table.
const (
	EnvNmstatectl = "NODEREG_NMSTATECTL"
	EnvNmcli      = "NODEREG_NMCLI"
	EnvNmc        = "NODEREG_NMC"
	EnvSystemctl  = "NODEREG_SYSTEMCTL"
	EnvElemental  = "NODEREG_ELEMENTAL"
)

// DefaultTools are the names upstream's client runs.
func DefaultTools() Tools {
	return Tools{Nmstatectl: "nmstatectl", Nmcli: "nmcli", Nmc: "nmc", Systemctl: "systemctl", Elemental: "elemental"}
}

// ToolsFromEnv starts from DefaultTools and applies the NODEREG_* overrides
// found through getenv (os.Getenv in the agent).
func ToolsFromEnv(getenv func(string) string) Tools {
	t := DefaultTools()
	for _, o := range []struct {
		env string
		dst *string
	}{{EnvNmstatectl, &t.Nmstatectl}, {EnvNmcli, &t.Nmcli}, {EnvNmc, &t.Nmc}, {EnvSystemctl, &t.Systemctl}, {EnvElemental, &t.Elemental}} {
		if v := getenv(o.env); v != "" {
			*o.dst = v
		}
	}
	return t
}

// ToolMissingError says which program a configurator needs and did not find.
type ToolMissingError struct {
	Tool string // the table entry, e.g. "nmstatectl"
	Path string // what was looked up
	Err  error
}

func (e *ToolMissingError) Error() string {
	return fmt.Sprintf("required tool %s not found (looked up %q): %v", e.Tool, e.Path, e.Err)
}

func (e *ToolMissingError) Unwrap() error { return e.Err }

// resolve finds an executable for one table entry.
func resolve(tool, value string) (string, error) {
	if value == "" {
		value = tool
	}
	p, err := exec.LookPath(value)
	if err != nil {
		return "", &ToolMissingError{Tool: tool, Path: value, Err: err}
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p, nil
}

// Lookup finds a tool of the table (value as in Tools, "" for the default
// name) or returns a *ToolMissingError naming it.
func Lookup(tool, value string) (string, error) { return resolve(tool, value) }
