package handover

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

const (
	systemAgentDir = host.SystemAgentDir
	systemAgentEtc = host.SystemAgentEtc
)

// agentFile is one file of the new system, at its host path.
type agentFile struct {
	path    string
	content []byte
}

// SystemAgent is the system agent's part of the new system: its files,
// ready for the hook or, without the toolkit, for writing now.
type SystemAgent struct{ files []agentFile }

// systemAgentConfig is elemental-system-agent's config.yaml, keys in
// upstream's order.
type systemAgentConfig struct {
	WorkDirectory        string `yaml:"workDirectory"`
	LocalPlanDirectory   string `yaml:"localPlanDirectory"`
	AppliedPlanDirectory string `yaml:"appliedPlanDirectory"`
	RemoteEnabled        bool   `yaml:"remoteEnabled"`
	ConnectionInfoFile   string `yaml:"connectionInfoFile"`
}

// SystemAgentFiles are the three files of elemental-system-agent
// (docs/protocol.md §8.5) for cfg; caCert is the registration CA as the dial
// reads it (a path on this machine, or PEM). They carry the system-agent
// token: never logged.
func SystemAgentFiles(cfg *protocol.Config, caCert string) (*SystemAgent, error) {
	files, err := systemAgentFiles(cfg, caCert)
	return &SystemAgent{files: files}, err
}

func systemAgentFiles(cfg *protocol.Config, caCert string) ([]agentFile, error) {
	sa := cfg.Elemental.SystemAgent
	ca := ""
	if c := cfg.Elemental.Registration.CACert; c != "" {
		// One loader for the TLS client and the kubeconfig
		// (docs/protocol.md §1.3): a CA that cannot be read fails the hand-over, never
		// its path base64-encoded as if it were the certificate.
		pemText, err := protocol.CAPEM(nil, caCert)
		if err != nil {
			return nil, &errclass.ConfigError{Err: fmt.Errorf("system-agent kubeconfig: %w", err)}
		}
		ca = base64.StdEncoding.EncodeToString(pemText)
	}
	kubeconfig := map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters":        []any{map[string]any{"name": "cluster", "cluster": map[string]any{"server": sa.URL, "certificate-authority-data": ca}}},
		"users":           []any{map[string]any{"name": "user", "user": map[string]any{"token": sa.Token}}},
		"contexts":        []any{map[string]any{"name": "context", "context": map[string]any{"cluster": "cluster", "user": "user", "namespace": sa.SecretNamespace}}},
		"current-context": "context",
	}
	kc, err := yaml.Marshal(kubeconfig)
	if err != nil {
		return nil, err
	}
	conn, err := json.Marshal(map[string]string{"kubeConfig": string(kc), "namespace": sa.SecretNamespace, "secretName": sa.SecretName})
	if err != nil {
		return nil, err
	}
	conf, err := yaml.Marshal(systemAgentConfig{
		WorkDirectory:        systemAgentDir + "/work",
		LocalPlanDirectory:   systemAgentDir + "/plans",
		AppliedPlanDirectory: systemAgentDir + "/applied",
		RemoteEnabled:        true,
		ConnectionInfoFile:   systemAgentDir + "/elemental_connection.json",
	})
	if err != nil {
		return nil, err
	}
	return []agentFile{
		{systemAgentDir + "/elemental_connection.json", conn},
		{systemAgentEtc + "/envs", []byte("CATTLE_AGENT_STRICT_VERIFY=\"" + strconv.FormatBool(sa.StrictTLSMode) + "\"")},
		{systemAgentEtc + "/config.yaml", conf},
	}, nil
}

// Write is install with no-toolkit: the node is not an elemental-toolkit
// image, so the system agent's files are written now, through files.
func (s *SystemAgent) Write(files host.FS) error {
	for _, f := range s.files {
		p := f.path
		if err := files.MkdirAll(path.Dir(p), 0o700); err != nil {
			return err
		}
		if err := files.WriteFile(p, f.content, 0o600); err != nil {
			return err
		}
	}
	return nil
}
