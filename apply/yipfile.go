package apply

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/yipschema"
)

const (
	applicatorName = "nodereg network applicator"
	keyfileStep    = "nodereg network keyfiles"
	// notLive keeps the installer ISO on its own (DHCP) networking: an ISO
	// booted on an installed machine sees that machine's /oem, and the
	// addresses there may already be released and handed to another node.
	// Both sentinels exist by the initramfs stage (07_live.yaml writes
	// them in rootfs.before). Active, passive and recovery boots all run
	// the step: recovery must reach the registration server with the same
	// addresses until a reset-network removes this file.
	notLive = "[ ! -f /run/elemental/live_mode ] && [ ! -f /run/cos/live_mode ]"
	// applicatorEnd is the applicator's last line. The step runs only when
	// the file at the applicator's boot path ends with it (wholeFile): a
	// file torn by a power cut where a rename is not atomic may still parse,
	// and would bring up a truncated profile; skipped, the node boots as it
	// did before the change and the agent writes the file again
	// (docs/apply.md, "Crash consistency"). Pure sh: no tool is assumed.
	applicatorEnd = "# end of the nodereg network applicator"
	wholeFile     = `{ l=; while IFS= read -r x; do l="$x"; done < ` + host.Applicator + `; [ "$l" = "` + applicatorEnd + `" ]; }`
)

// applicatorHeader is a YAML comment: yip ignores it, and it is not the
// "#cloud-config" line that would turn the file into a cloud-init file.
const applicatorHeader = "# Written by nodereg-agent; replaced or removed by it (nodereg-agent --reset-network).\n" +
	"# Re-creates the NetworkManager keyfiles at every initramfs stage.\n"

// buildApplicator returns the yip file that writes keyfiles into keyfileDir
// at every boot. Only fields Elemental's rancher/yip engine also honours are
// used: name, if, directories, files.
func buildApplicator(keyfileDir string, kfs []Keyfile) ([]byte, error) {
	step := yipschema.Stage{
		Name:        keyfileStep,
		If:          notLive + " && " + wholeFile,
		Directories: []yipschema.Directory{{Path: keyfileDir, Permissions: 0o755}},
	}
	for _, kf := range kfs {
		step.Files = append(step.Files, yipschema.File{
			Path:        path.Join(keyfileDir, kf.Name),
			Permissions: 0o600,
			Content:     NeutraliseTemplate(string(kf.Content)),
		})
	}
	cfg := yipschema.Config{
		Name:   applicatorName,
		Stages: map[string][]yipschema.Stage{"initramfs": {step}},
	}
	var doc yaml.Node
	if err := doc.Encode(&cfg); err != nil {
		return nil, fmt.Errorf("encoding yip applicator: %w", err)
	}
	guardsFirst(&doc)
	var b bytes.Buffer
	b.WriteString(applicatorHeader)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encoding yip applicator: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding yip applicator: %w", err)
	}
	b.WriteString(applicatorEnd + "\n")
	return b.Bytes(), nil
}

// guardsFirst puts each step's name and if before its files: a prefix of
// the file that names a keyfile then also holds the guard that skips it
// (yipschema.Stage declares if after files, and yaml keeps that order).
func guardsFirst(doc *yaml.Node) {
	for _, stages := range mappingValues(doc, "stages") {
		for _, seq := range stages.Content {
			if seq.Kind != yaml.MappingNode && seq.Kind != yaml.SequenceNode {
				continue
			}
			for _, step := range seq.Content {
				moveFirst(step, "if")
				moveFirst(step, "name")
			}
		}
	}
}

// mappingValues is the value of key in mapping m, as a one-element list
// (none when absent).
func mappingValues(m *yaml.Node, key string) []*yaml.Node {
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return []*yaml.Node{m.Content[i+1]}
		}
	}
	return nil
}

// moveFirst moves key and its value to the front of mapping m.
func moveFirst(m *yaml.Node, key string) {
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			pair := []*yaml.Node{m.Content[i], m.Content[i+1]}
			rest := append(append([]*yaml.Node(nil), m.Content[:i]...), m.Content[i+2:]...)
			m.Content = append(pair, rest...)
			return
		}
	}
}

// NeutraliseTemplate makes yip's text/template pass render s to itself:
// every "{{" becomes an action printing "{{". With no other action in the
// text the render cannot fail, so neither engine falls back to the raw text.
func NeutraliseTemplate(s string) string {
	return strings.ReplaceAll(s, "{{", `{{"{{"}}`)
}
