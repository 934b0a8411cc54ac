package inventory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// AnnotationOptions are the inputs of the MsgAnnotations payload.
type AnnotationOptions struct {
	Files          host.FS // the machine whose os-release is read (required)
	RegVersion     string  // agent version, e.g. "v1.9.2"
	Auth           string  // "tpm", "mac", "sys-uuid" or "emulated-tpm"
	RegistrationIP string  // local address of the websocket connection, port already cut; "" = omit
	NoToolkit      bool
}

// osReleaseKeys maps os-release keys to annotation keys (docs/protocol.md §5.4).
var osReleaseKeys = map[string]string{
	"NAME": "os.name", "VERSION": "os.version", "VERSION_ID": "os.version-id", "ID": "os.id",
	"PRETTY_NAME": "os.pretty-name", "IMAGE": "os.image", "CPE_NAME": "os.cpe-name",
}

// Annotations builds the MsgAnnotations map. A missing os-release only
// leaves the os.* keys out.
func Annotations(o AnnotationOptions) map[string]string {
	out := map[string]string{}
	if o.RegVersion != "" {
		out["reg-version"] = o.RegVersion
	}
	if o.Auth != "" {
		out["auth"] = o.Auth
	}
	if o.RegistrationIP != "" {
		out["registration-ip"] = o.RegistrationIP
	}
	if o.NoToolkit {
		out["os.unmanaged"] = "true"
	}
	if o.Files == nil {
		panic("inventory.Annotations: no host.FS: the caller hands the machine's (agent.newEnv)")
	}
	b, err := o.Files.ReadFile(host.OSRelease, host.MaxAttr)
	if err != nil {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if ak, known := osReleaseKeys[k]; known {
			// Upstream trims double quotes only; single quotes stay.
			out[ak] = strings.Trim(v, `"`)
		}
	}
	return out
}

// maxLabelsFile bounds the local labels file.
const maxLabelsFile = 1 << 20

// Labels merges the registration labels with upstream's precedence
// (docs/protocol.md §5.5), lowest first: the config file's labels, the local
// labels file (a host path, read through files; missing is fine,
// unparseable is an error), the --label flags ("k=v" or "k=v,k2=v2").
func Labels(files host.FS, config map[string]string, labelsFile string, flags []string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range config {
		out[k] = v
	}
	if labelsFile != "" {
		b, err := files.ReadFile(labelsFile, maxLabelsFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("labels: reading %s: %w", files.Path(labelsFile), err)
		default:
			// Held to the budget every local YAML is held to: a 1 MiB file
			// of aliases would otherwise expand to GBs as it decodes.
			var file map[string]string
			doc, err := protocol.ParseYAML(b)
			if err == nil {
				err = doc.Decode(&file)
			}
			if err != nil {
				return nil, fmt.Errorf("labels: parsing %s: %w", files.Path(labelsFile), err)
			}
			for k, v := range file {
				out[k] = v
			}
		}
	}
	for _, f := range flags {
		for _, pair := range strings.Split(f, ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("labels: --label %q: want key=value", pair)
			}
			out[strings.TrimSpace(k)] = v
		}
	}
	return out, nil
}
