package host

import (
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Tools is the one table of external programs the agent runs. Each entry
// is a name looked up in PATH or an absolute path; ToolsFromEnv lets images
// and tests point them elsewhere (docs/architecture.md).
type Tools struct {
	Nmstatectl string // NODEREG_NMSTATECTL
	Nmcli      string // NODEREG_NMCLI
	Nmc        string // NODEREG_NMC (nm-configurator)
	Elemental  string // NODEREG_ELEMENTAL (the toolkit's installer, for install/reset)
	Dmidecode  string // NODEREG_DMIDECODE (the inventory's SMBIOS, read only)
	// NoDmidecode: NODEREG_DMIDECODE is set and empty, which turns
	// dmidecode off (the inventory decodes the kernel's DMI tables).
	NoDmidecode bool
}

// Environment variables that override the tool table.
const (
	EnvNmstatectl = "NODEREG_NMSTATECTL"
	EnvNmcli      = "NODEREG_NMCLI"
	EnvNmc        = "NODEREG_NMC"
	EnvElemental  = "NODEREG_ELEMENTAL"
	EnvDmidecode  = "NODEREG_DMIDECODE"
)

// DefaultTools are the names upstream's client runs.
func DefaultTools() Tools {
	return Tools{Nmstatectl: "nmstatectl", Nmcli: "nmcli", Nmc: "nmc", Elemental: "elemental", Dmidecode: "dmidecode"}
}

func (t *Tools) entries() []struct {
	env, name string
	dst       *string
} {
	return []struct {
		env, name string
		dst       *string
	}{
		{EnvNmstatectl, "nmstatectl", &t.Nmstatectl},
		{EnvNmcli, "nmcli", &t.Nmcli},
		{EnvNmc, "nmc", &t.Nmc},
		{EnvElemental, "elemental", &t.Elemental},
		{EnvDmidecode, "dmidecode", &t.Dmidecode},
	}
}

// ToolsFromEnv starts from DefaultTools and applies the NODEREG_* overrides
// found through lookup (os.LookupEnv in the agent). An empty value keeps
// the default, except NODEREG_DMIDECODE's, which turns dmidecode off: the
// inventory has another source, the other tools have none.
func ToolsFromEnv(lookup func(string) (string, bool)) Tools {
	t := DefaultTools()
	for _, e := range t.entries() {
		if v, _ := lookup(e.env); v != "" {
			*e.dst = v
		}
	}
	if v, set := lookup(EnvDmidecode); set && v == "" {
		t.NoDmidecode = true
	}
	return t
}

// OrDefault fills empty entries with their default names.
func (t Tools) OrDefault() Tools {
	for _, e := range t.entries() {
		if *e.dst == "" {
			*e.dst = e.name
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

// Class: a person must install the tool or change the config.
func (e *ToolMissingError) Class() errclass.Class { return errclass.Config }

// Cause names it on the outcome line.
func (e *ToolMissingError) Cause() string { return "network config the node cannot use" }

func (e *ToolMissingError) Error() string {
	return fmt.Sprintf("required tool %s not found (looked up %q): %v", e.Tool, e.Path, e.Err)
}

func (e *ToolMissingError) Unwrap() error { return e.Err }

// Lookup finds the executable of one table entry (tool is its name, e.g.
// "nmstatectl"; value its entry, "" for the default name) as an absolute
// path, or returns a *ToolMissingError naming it.
func Lookup(tool, value string) (string, error) {
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
