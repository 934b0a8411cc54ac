// Package yipschema is the part of mudler/yip's config schema the agent
// writes and reads (a config's name and stages; a stage's name, if,
// files and directories), encoded as yip's pkg/schema encodes it: the
// same keys in the same order, byte for byte (the package's test
// compares the two).
//
// Why not yip's own types: pkg/schema imports gojq for a jq query the
// agent never runs, and gojq builds its builtin table (1,665 allocations,
// about 0.25 ms) in package initialisation, at every start of every
// command. The agent's binary no longer links it.
package yipschema

// Config is yip's YipConfig.
type Config struct {
	Name   string             `yaml:"name,omitempty"`
	Stages map[string][]Stage `yaml:"stages,omitempty"`
}

// Stage is yip's Stage, the fields the agent uses, in yip's order.
type Stage struct {
	Files       []File      `yaml:"files,omitempty"`
	Directories []Directory `yaml:"directories,omitempty"`
	If          string      `yaml:"if,omitempty"`
	Name        string      `yaml:"name,omitempty"`
}

// File is yip's File: untagged there, so every field is written under
// its lower-cased name, zero or not.
type File struct {
	Path         string
	Permissions  uint32
	Owner, Group int
	Content      string
	Encoding     string
	OwnerString  string
}

// Directory is yip's Directory.
type Directory struct {
	Path         string
	Permissions  uint32
	Owner, Group int
}
