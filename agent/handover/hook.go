package handover

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/yipschema"
)

// OEM mount points while the elemental toolkit runs a hook (docs/protocol.md §8.4).
const (
	oemDuringInstall = host.OEMDuringInstall
	oemDuringReset   = host.OEMDuringReset
)

// hookFile is one file the hook writes into the OEM partition; name is
// relative to the OEM root.
type hookFile struct {
	name    string
	content []byte
}

// finalizeHook builds the install/reset hook of docs/protocol.md §8.4: a yip
// config named "Elemental Finalize System" whose stage (before-install or
// before-reset) writes each file into the OEM partition mounted at oem, so
// the registration, the state and the network applicator reach the new
// system even when the OEM partition is formatted.
func finalizeHook(stage, oem string, files []hookFile) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b hookFile) int { return strings.Compare(a.name, b.name) })
	var steps []yipschema.Stage
	for _, f := range sorted {
		if !plainRelative(f.name) {
			return nil, fmt.Errorf("hook file %q: not a plain relative path", f.name)
		}
		dst := path.Join(oem, f.name)
		st := yipschema.Stage{
			Name:  "nodereg " + f.name,
			Files: []yipschema.File{{Path: dst, Permissions: 0o600, Content: apply.NeutraliseTemplate(string(f.content))}},
		}
		if d := path.Dir(dst); d != oem {
			st.Directories = []yipschema.Directory{{Path: d, Permissions: 0o700}}
		}
		steps = append(steps, st)
	}
	cfg := yipschema.Config{Name: "Elemental Finalize System", Stages: map[string][]yipschema.Stage{stage: steps}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&cfg); err != nil {
		return nil, fmt.Errorf("encoding finalize hook: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// plainRelative: a clean relative path whose file name is neither empty,
// hidden nor odd (the hook's names are ours; this is the last guard).
func plainRelative(name string) bool {
	base := path.Base(name)
	return name != "" && path.Clean(name) == name && !path.IsAbs(name) && !strings.HasPrefix(name, "../") &&
		base != "." && base != ".." && !strings.HasPrefix(base, ".") && !strings.ContainsAny(name, "\\\x00\n\r")
}

// initramfsFile is a yip config that writes one file at the initramfs stage
// unless it exists: how the registration config and state reach the
// installed system once, and are owned by the running agent afterwards
// (docs/protocol.md §8.4 guards).
func initramfsFile(name, dst string, content []byte) ([]byte, error) {
	cfg := yipschema.Config{Name: name, Stages: map[string][]yipschema.Stage{"initramfs": {{
		Name:        name,
		If:          "[ ! -f " + dst + " ]",
		Directories: []yipschema.Directory{{Path: path.Dir(dst), Permissions: 0o700}},
		Files:       []yipschema.File{{Path: dst, Permissions: 0o600, Content: apply.NeutraliseTemplate(string(content))}},
	}}}}
	b, err := yaml.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return b, nil
}

// initramfsFiles is a yip config that writes files (0600) at every
// initramfs stage, creating their directories (0700).
func initramfsFiles(name string, files []agentFile) ([]byte, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b agentFile) int { return strings.Compare(a.path, b.path) })
	st := yipschema.Stage{Name: name}
	dirs := map[string]bool{}
	for _, f := range sorted {
		if d := path.Dir(f.path); !dirs[d] {
			dirs[d] = true
			st.Directories = append(st.Directories, yipschema.Directory{Path: d, Permissions: 0o700})
		}
		st.Files = append(st.Files, yipschema.File{Path: f.path, Permissions: 0o600, Content: apply.NeutraliseTemplate(string(f.content))})
	}
	b, err := yaml.Marshal(&yipschema.Config{Name: name, Stages: map[string][]yipschema.Stage{"initramfs": {st}}})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return b, nil
}
