package bootstrap

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/termsafe"
	"github.com/nodereg/nodereg/protocol"
)

// DropInDirs are the directories a cloud-config may write a bootstrap
// drop-in into and have the agent read it: config.d/ beside the installed
// system's and the live ISO's config file, and the runtime directory
// (agent/localconfig.DropInDirs gives the same for one config path).
var DropInDirs = []string{
	path.Join(path.Dir(host.ConfigFile), "config.d"),
	path.Join(path.Dir(host.InstallConfigFile), "config.d"),
	host.RuntimeConfigDropIns,
}

// maxCloudFiles bounds the files of a cloud-config looked at: far above a
// real one, far below what would make an offline preview crawl.
const maxCloudFiles = 1024

// FromDocument finds the bootstrap network in a file an operator holds
// before any machine boots (agent render --bootstrap -f): an elemental
// config file or drop-in (Key itself), a cloud-config (yip stages) one of
// whose files is such a drop-in, a SeedImage (spec.cloud-config) or a
// MachineRegistration (spec.config.cloud-config). It returns the settings
// and where they were found, for the output. A cloud-config drop-in that
// the agent would not read (not a *.yaml file in DropInDirs) is an error
// naming the path: on the node it would be silently ignored.
func FromDocument(b []byte) (*Config, string, error) {
	// One budget for the file and every document inside it (the content
	// of a cloud-config's files), aliases expanded.
	var budget protocol.YAMLBudget
	root, err := budget.Parse(b)
	if errors.Is(err, protocol.ErrYAMLTooLarge) {
		return nil, "", errclass.Configf("%w", err)
	}
	if err != nil {
		return nil, "", errclass.Configf("not YAML: %w", err)
	}
	doc := *root
	if lookup(&doc, "elemental", "registration", "bootstrap-network") != nil {
		c, err := FromConfigNode(&doc)
		return c, "config file or drop-in", err
	}
	var cloud *yaml.Node
	what := "cloud-config"
	name := scalar(lookup(&doc, "metadata", "name"))
	if ns := scalar(lookup(&doc, "metadata", "namespace")); ns != "" {
		name = ns + "/" + name
	}
	name = termsafe.Quote(name)
	switch kind := scalar(lookup(&doc, "kind")); kind {
	case "SeedImage":
		cloud, what = lookup(&doc, "spec", "cloud-config"), "SeedImage "+name+" spec.cloud-config"
	case "MachineRegistration":
		cloud, what = lookup(&doc, "spec", "config", "cloud-config"), "MachineRegistration "+name+" spec.config.cloud-config"
	case "":
		cloud = lookup(&doc, "stages")
		if cloud != nil {
			cloud = &doc
		}
	default:
		return nil, "", errclass.Configf("kind %s: want an elemental config file or drop-in, a cloud-config, a SeedImage or a MachineRegistration", kind)
	}
	if cloud == nil {
		return nil, "", errclass.Configf("no %s in it, and no cloud-config (stages) that writes a drop-in with one", Key)
	}
	return fromCloudConfig(cloud, what, &budget)
}

// fromCloudConfig finds the one file of the cloud-config's stages whose
// content carries Key.
func fromCloudConfig(cloud *yaml.Node, what string, budget *protocol.YAMLBudget) (*Config, string, error) {
	stages := lookup(cloud, "stages")
	if stages == nil || stages.Kind != yaml.MappingNode {
		return nil, "", errclass.Configf("%s: no stages", what)
	}
	type found struct{ where, path string }
	var hits []found
	var conf *Config
	seen := 0
	for i := 0; i+1 < len(stages.Content); i += 2 {
		stage, steps := termsafe.Quote(stages.Content[i].Value), stages.Content[i+1]
		if steps.Kind != yaml.SequenceNode {
			continue
		}
		for _, step := range steps.Content {
			files := lookup(step, "files")
			if files == nil || files.Kind != yaml.SequenceNode {
				continue
			}
			for _, f := range files.Content {
				if seen++; seen > maxCloudFiles {
					return nil, "", errclass.Configf("%s: more than %d files", what, maxCloudFiles)
				}
				raw, content := scalar(lookup(f, "path")), scalar(lookup(f, "content"))
				p := termsafe.Quote(raw) // for messages; the check takes the path as it is
				parsed, err := budget.Parse([]byte(content))
				if errors.Is(err, protocol.ErrYAMLTooLarge) {
					return nil, "", errclass.Configf("%s, stage %s, file %s: %w", what, stage, p, err)
				}
				if err != nil || lookup(parsed, "elemental", "registration", "bootstrap-network") == nil {
					continue
				}
				inner := *parsed
				where := fmt.Sprintf("%s, stage %s %q, file %s", what, stage, scalar(lookup(step, "name")), p)
				if enc := scalar(lookup(f, "encoding")); enc != "" {
					return nil, "", errclass.Configf("%s: encoding %s: write the drop-in as plain text", where, enc)
				}
				if !readAsDropIn(raw) {
					return nil, "", errclass.Configf("%s: the agent reads no drop-in there: want a *.yaml file in %s", where, strings.Join(DropInDirs, ", "))
				}
				c, err := FromConfigNode(&inner)
				if err != nil {
					return nil, "", fmt.Errorf("%s: %w", where, err)
				}
				hits = append(hits, found{where, p})
				conf = c
			}
		}
	}
	switch len(hits) {
	case 0:
		return nil, "", errclass.Configf("%s: no file of its stages is a drop-in with %s", what, Key)
	case 1:
		return conf, hits[0].where, nil
	}
	var ps []string
	for _, h := range hits {
		ps = append(ps, h.path)
	}
	return nil, "", errclass.Configf("%s: %d files carry %s (%s): the agent would merge them; keep one", what, len(hits), Key, strings.Join(ps, ", "))
}

// readAsDropIn: the agent reads p as a drop-in (agent/localconfig).
func readAsDropIn(p string) bool {
	if !strings.HasSuffix(p, ".yaml") {
		return false
	}
	for _, d := range DropInDirs {
		if path.Dir(path.Clean(p)) == d {
			return true
		}
	}
	return false
}

func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
