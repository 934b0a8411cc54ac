package handover

import (
	"encoding/base64"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/protocol"
)

const testCAPEM = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIBATAKBggqhkjOPQQDAjAA\n-----END CERTIFICATE-----\n"

// The kubeconfig's CA comes from the one CA loader: PEM text as it is, and
// a CA that cannot be read fails the hand-over instead of shipping its path
// as the certificate (docs/reliability.md, "Hostile server").
func TestSystemAgentCA(t *testing.T) {
	cfg := &protocol.Config{}
	cfg.Elemental.SystemAgent.Token = "tok"
	cfg.Elemental.Registration.CACert = testCAPEM
	files, err := systemAgentFiles(cfg, cfg.Elemental.Registration.CACert)
	if err != nil {
		t.Fatal(err)
	}
	want := base64.StdEncoding.EncodeToString([]byte(testCAPEM))
	if !strings.Contains(string(files[0].content), want) {
		t.Errorf("kubeconfig lacks the CA's PEM:\n%s", files[0].content)
	}
	missing := filepath.Join(t.TempDir(), "no-ca.pem")
	cfg.Elemental.Registration.CACert = missing
	files, err = systemAgentFiles(cfg, cfg.Elemental.Registration.CACert)
	var ce *errclass.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no-ca.pem") {
		t.Fatalf("unreadable CA: files %d, err %v; want a ConfigError naming it", len(files), err)
	}
}
