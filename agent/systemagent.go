package agent

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/protocol"
)

const (
	systemAgentDir = "/var/lib/elemental/agent"
	systemAgentEtc = "/etc/rancher/elemental/agent"
)

// agentFile is one file of the new system, at its host path.
type agentFile struct {
	path    string
	content []byte
}

// systemAgentConfig is elemental-system-agent's config.yaml, keys in
// upstream's order.
type systemAgentConfig struct {
	WorkDirectory        string `yaml:"workDirectory"`
	LocalPlanDirectory   string `yaml:"localPlanDirectory"`
	AppliedPlanDirectory string `yaml:"appliedPlanDirectory"`
	RemoteEnabled        bool   `yaml:"remoteEnabled"`
	ConnectionInfoFile   string `yaml:"connectionInfoFile"`
}

// systemAgentFiles are the three files of elemental-system-agent
// (PROTOCOL.md 8.6). They carry the system-agent token: never logged.
func (r *run) systemAgentFiles() ([]agentFile, error) {
	sa := r.cfg.Elemental.SystemAgent
	ca := ""
	if c := r.cfg.Elemental.Registration.CACert; c != "" {
		// One loader for the TLS client and the kubeconfig (issue 12,
		// item 10): a CA that cannot be read fails the hand-over, never
		// its path base64-encoded as if it were the certificate.
		pemText, err := protocol.CAPEM(r.caCert())
		if err != nil {
			return nil, &ConfigError{Err: fmt.Errorf("system-agent kubeconfig: %w", err)}
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
	cfg, err := yaml.Marshal(systemAgentConfig{
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
		{systemAgentEtc + "/config.yaml", cfg},
	}, nil
}

// writeSystemAgentFiles is install with no-toolkit: the node is not an
// elemental-toolkit image, so the system agent's files are written now.
func (r *run) writeSystemAgentFiles() error {
	files, err := r.systemAgentFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		p := f.path
		if err := r.files.MkdirAll(path.Dir(p), 0o700); err != nil {
			return err
		}
		if err := r.files.WriteFile(p, f.content, 0o600); err != nil {
			return err
		}
	}
	return nil
}
