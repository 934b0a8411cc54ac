package apply

import (
	"bytes"
	"fmt"
	"path"
	"sort"

	"github.com/mudler/yip/pkg/schema"
	"gopkg.in/yaml.v3"
)

// OEM mount points while the elemental toolkit runs a hook (PROTOCOL.md 8.7).
const (
	OEMDuringInstall = "/run/elemental/oem"
	OEMDuringReset   = "/oem"
)

// HookFile is one file the hook writes into the OEM partition; Name is
// relative to the OEM root.
type HookFile struct {
	Name    string
	Content []byte
}

// FinalizeHook builds the install/reset hook of PROTOCOL.md 8.7: a yip
// config named "Elemental Finalize System" whose stage (before-install or
// before-reset) writes each file into the OEM partition mounted at oem, so
// the registration, the state and the network applicator reach the new
// system even when the OEM partition is formatted.
func FinalizeHook(stage, oem string, files []HookFile) ([]byte, error) {
	sorted := append([]HookFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var steps []schema.Stage
	for _, f := range sorted {
		if err := checkFileName("hook."+f.Name, path.Base(f.Name)); err != nil || path.Clean(f.Name) != f.Name || path.IsAbs(f.Name) {
			return nil, fmt.Errorf("hook file %q: not a plain relative path", f.Name)
		}
		dst := path.Join(oem, f.Name)
		st := schema.Stage{
			Name:  "nodereg " + f.Name,
			Files: []schema.File{{Path: dst, Permissions: 0o600, Content: neutraliseTemplate(string(f.Content))}},
		}
		if d := path.Dir(dst); d != oem {
			st.Directories = []schema.Directory{{Path: d, Permissions: 0o700}}
		}
		steps = append(steps, st)
	}
	cfg := schema.YipConfig{Name: "Elemental Finalize System", Stages: map[string][]schema.Stage{stage: steps}}
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

// InitramfsFile is a yip config that writes one file at the initramfs stage
// unless it exists: how the registration config and state reach the
// installed system once, and are owned by the running agent afterwards
// (PROTOCOL.md 8.7 guards).
func InitramfsFile(name, dst string, content []byte) ([]byte, error) {
	cfg := schema.YipConfig{Name: name, Stages: map[string][]schema.Stage{"initramfs": {{
		Name:        name,
		If:          "[ ! -f " + dst + " ]",
		Directories: []schema.Directory{{Path: path.Dir(dst), Permissions: 0o700}},
		Files:       []schema.File{{Path: dst, Permissions: 0o600, Content: neutraliseTemplate(string(content))}},
	}}}}
	b, err := yaml.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return b, nil
}

// InitramfsFiles is a yip config that writes files (0600) at every
// initramfs stage, creating their directories (0700).
func InitramfsFiles(name string, files map[string][]byte) ([]byte, error) {
	st := schema.Stage{Name: name}
	dirs := map[string]bool{}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if d := path.Dir(p); !dirs[d] {
			dirs[d] = true
			st.Directories = append(st.Directories, schema.Directory{Path: d, Permissions: 0o700})
		}
		st.Files = append(st.Files, schema.File{Path: p, Permissions: 0o600, Content: neutraliseTemplate(string(files[p]))})
	}
	b, err := yaml.Marshal(&schema.YipConfig{Name: name, Stages: map[string][]schema.Stage{"initramfs": {st}}})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	return b, nil
}
