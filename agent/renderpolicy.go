package agent

import (
	"errors"
	"io/fs"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// renderPolicy reads the network policy of the node at root from its
// config file (elemental.registration.network-policy, docs/reliability.md),
// so that `agent render` previews a node that opts in to a rule as its runs
// will judge the config. No file there: the default policy, unless
// required (the operator named the file); no configPath: the default.
func renderPolicy(root, configPath string, required bool) (netpolicy.Policy, error) {
	if configPath == "" {
		return netpolicy.Policy{}, nil
	}
	files := newEnv(Options{Root: root}).root
	b, err := files.ReadFile(configPath, localconfig.MaxFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !required:
		return netpolicy.Policy{}, nil
	case err != nil:
		return netpolicy.Policy{}, errclass.Configf("config file %s: %v", files.Path(configPath), err)
	}
	doc, err := protocol.ParseYAML(b)
	if err != nil {
		return netpolicy.Policy{}, errclass.Configf("config file %s: %w", files.Path(configPath), err)
	}
	pol, err := netpolicy.FromConfigNode(files.Path(configPath), doc)
	if err != nil {
		return netpolicy.Policy{}, &errclass.ConfigError{Err: err}
	}
	return pol, nil
}
