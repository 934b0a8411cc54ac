package apply

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/mudler/yip/pkg/schema"
	"gopkg.in/yaml.v3"
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
)

// applicatorHeader is a YAML comment: yip ignores it, and it is not the
// "#cloud-config" line that would turn the file into a cloud-init file.
const applicatorHeader = "# Written by the nodereg agent; replaced or removed by it (agent --reset-network).\n" +
	"# Re-creates the NetworkManager keyfiles at every initramfs stage.\n"

// buildApplicator returns the yip file that writes keyfiles into keyfileDir
// at every boot. Only fields Elemental's rancher/yip engine also honours are
// used: name, if, directories, files.
func buildApplicator(keyfileDir string, kfs []Keyfile) ([]byte, error) {
	step := schema.Stage{
		Name:        keyfileStep,
		If:          notLive,
		Directories: []schema.Directory{{Path: keyfileDir, Permissions: 0o755}},
	}
	for _, kf := range kfs {
		step.Files = append(step.Files, schema.File{
			Path:        path.Join(keyfileDir, kf.Name),
			Permissions: 0o600,
			Content:     NeutraliseTemplate(string(kf.Content)),
		})
	}
	cfg := schema.YipConfig{
		Name:   applicatorName,
		Stages: map[string][]schema.Stage{"initramfs": {step}},
	}
	var b bytes.Buffer
	b.WriteString(applicatorHeader)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&cfg); err != nil {
		return nil, fmt.Errorf("encoding yip applicator: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding yip applicator: %w", err)
	}
	return b.Bytes(), nil
}

// NeutraliseTemplate makes yip's text/template pass render s to itself:
// every "{{" becomes an action printing "{{". With no other action in the
// text the render cannot fail, so neither engine falls back to the raw text.
func NeutraliseTemplate(s string) string {
	return strings.ReplaceAll(s, "{{", `{{"{{"}}`)
}
