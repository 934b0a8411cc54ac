package faults

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
)

// Secret values the server hands out under elemental.system-agent: none of
// them may reach a log line.
const (
	secretToken = "SECRET-TOKEN-7f3a9c"
	secretName  = "SECRET-NAME-b41e"
	secretURL   = "https://SECRET-URL-c0ffee.invalid/k8s"
)

func regserverConfig(dir string) string {
	cfg := node.ServerConfig{
		Name: "sec",
		Elemental: "      system-agent:\n        url: " + secretURL + "\n        token: " + secretToken +
			"\n        secret-name: " + secretName + "\n        secret-namespace: fleet-default\n",
		Network: node.AddressOnlyTemplate(24),
		Pool:    "192.168.122.150-192.168.122.160", Prefix: 24, Gateway: "192.168.122.1",
	}.YAML()
	p := filepath.Join(dir, "regserver.yaml")
	_ = os.WriteFile(p, []byte(cfg), 0o600)
	return p
}

// pki is a CA and a server certificate for 127.0.0.1 signed by it.
type pki struct {
	caPEM, certPEM, keyPEM []byte
}

func newPKI(t *testing.T, cn string) pki {
	t.Helper()
	ca := testpki.New(t, cn)
	certPEM, keyPEM := ca.IssuePEM(t, "127.0.0.1", "localhost")
	return pki{caPEM: ca.CertPEM(), certPEM: certPEM, keyPEM: keyPEM}
}

func useStub(t *testing.T) {
	t.Helper()
	node.Must(t, os.Setenv(host.EnvNmstatectl, testbin.NmstatectlStub(t)))
}

// startTLSRegserver runs bin/regserver with --tls-cert/--tls-key.
func startTLSRegserver(t *testing.T, p pki) *labkit.Regserver {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	node.Must(t, os.WriteFile(cert, p.certPEM, 0o600))
	node.Must(t, os.WriteFile(key, p.keyPEM, 0o600))
	return labkit.StartRegserver(t, "--config", regserverConfig(dir), "--listen", "127.0.0.1:0",
		"--no-tpm", "--network-wait", "0", "--tls-cert", cert, "--tls-key", key, "--ca-cert", cert)
}

func runAgent(t *testing.T, m *node.Machine, log *node.Log) (*agent.Result, error) {
	// The bounds are for a hang: these runs succeed, or fail at once on
	// a certificate (78, not retried), whatever the machine's load.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return agent.Run(ctx, agent.Options{
		Root: m.Root, Deadline: 2 * time.Minute, NetworkTimeout: 2 * time.Minute, SessionDeadline: 30 * time.Second,
		// Retries after a refused certificate wait on a fake clock.
		Clock:   retrytest.NewClock(time.Now()),
		Version: "tls", Out: log, Log: log.Entry(), Runner: m.Runner(),
	})
}

func TestTLS(t *testing.T) {
	useStub(t)
	good := newPKI(t, "good")
	rs := startTLSRegserver(t, good)
	url := rs.URL("sec-token")
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("regserver with --tls-cert serves %s", url)
	}
	// A ca-cert path in the config is read under the node's root.
	const caFile = "/etc/registration-ca.pem"
	writeUnderRoot := func(m *node.Machine, p string, b []byte) {
		node.Must(t, os.MkdirAll(filepath.Join(m.Root, filepath.Dir(p)), 0o755))
		node.Must(t, os.WriteFile(filepath.Join(m.Root, p), b, 0o644))
	}
	indent := "      " + strings.ReplaceAll(strings.TrimSpace(string(good.caPEM)), "\n", "\n      ")

	t.Run("ca-file", func(t *testing.T) {
		var log node.Log
		m := node.New(t, "52:54:00:00:01:01", url, "    ca-cert: "+caFile+"\n")
		writeUnderRoot(m, caFile, good.caPEM)
		res, err := runAgent(t, m, &log)
		if err != nil {
			t.Fatalf("https registration with the CA as a file: %v\n%s", err, log.String())
		}
		if res.Addresses["inventory-ip"] == "" {
			t.Errorf("no address over https: %+v", res)
		}
		if strings.Contains(log.String(), "plain http") {
			t.Errorf("https run warned about plain http")
		}
	})
	t.Run("ca-inline-pem", func(t *testing.T) {
		var log node.Log
		m := node.New(t, "52:54:00:00:01:02", url, "    ca-cert: |\n"+indent+"\n")
		res, err := runAgent(t, m, &log)
		if err != nil {
			t.Fatalf("https registration with the CA inline: %v\n%s", err, log.String())
		}
		if res.Addresses["inventory-ip"] == "" {
			t.Errorf("no address over https: %+v", res)
		}
	})
	t.Run("other-ca", func(t *testing.T) {
		other := newPKI(t, "other")
		var log node.Log
		m := node.New(t, "52:54:00:00:01:03", url, "    ca-cert: "+caFile+"\n")
		writeUnderRoot(m, caFile, other.caPEM)
		before := node.Files(t, m.Root)
		_, err := runAgent(t, m, &log)
		if err == nil {
			t.Fatal("registration succeeded with a server certificate from another CA")
		}
		// A certificate the CA did not sign needs a person: 78, no retry.
		if code := exitcode.Of(err); code != exitcode.Config {
			t.Errorf("exit %d, want %d", code, exitcode.Config)
		}
		if strings.Contains(log.String(), "retrying in") {
			t.Errorf("a certificate from another CA was retried:\n%s", log.String())
		}
		t.Logf("other CA: %v", err)
		if !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "dial") {
			t.Errorf("error does not say certificate at dial: %v", err)
		}
		if ch := node.Changed(before, node.Files(t, m.Root)); len(ch) > 0 {
			t.Errorf("failed run changed %v", ch)
		}
	})
	t.Run("no-system-pool", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		auth := protocol.Plain{AuthKind: "mac", ID: "52:54:00:00:01:04"}
		cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, CACert: string(good.caPEM), NoSystemPool: true}, auth)
		if err != nil {
			t.Fatalf("dial with only the given CA: %v", err)
		}
		cc.Close()
		other := newPKI(t, "other")
		_, err = protocol.Dial(ctx, protocol.DialOptions{URL: url, CACert: string(other.caPEM), NoSystemPool: true}, auth)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("dial trusting only another CA: %v", err)
		}
		_, err = protocol.Dial(ctx, protocol.DialOptions{URL: url, NoSystemPool: true}, auth)
		if err == nil || !strings.Contains(err.Error(), "ca-cert") {
			t.Errorf("dial with no CA and no system pool: %v", err)
		}
		// The system pool alone does not know our CA.
		_, err = protocol.Dial(ctx, protocol.DialOptions{URL: url}, auth)
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("dial trusting only the system pool: %v", err)
		}
	})
}

func TestPlainHTTPWarns(t *testing.T) {
	useStub(t)
	dir := t.TempDir()
	rs := labkit.StartRegserver(t, "--config", regserverConfig(dir),
		"--listen", "127.0.0.1:0", "--no-tpm", "--network-wait", "0")
	var log node.Log
	m := node.New(t, "52:54:00:00:02:01", rs.URL("sec-token"), "")
	if _, err := runAgent(t, m, &log); err != nil {
		t.Fatalf("plain http registration: %v\n%s", err, log.String())
	}
	var warn string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "level=warning") && strings.Contains(l, "plain http") {
			warn = l
		}
	}
	if warn == "" {
		t.Fatalf("no warning about plain http in the log:\n%s", log.String())
	}
	t.Logf("warning: %s", warn)
}

// TestSecretsNotLogged runs bin/nodereg-agent --debug (the real binary, its real
// logger) against a regserver whose config carries a system-agent token,
// and greps everything the agent printed.
func TestSecretsNotLogged(t *testing.T) {
	stub := testbin.NmstatectlStub(t)
	agentBin := testbin.Build(t, "./cmd/agent")
	dir := t.TempDir()
	rs := labkit.StartRegserver(t, "--config", regserverConfig(dir),
		"--listen", "127.0.0.1:0", "--no-tpm", "--network-wait", "0", "--debug")
	m := node.New(t, "52:54:00:00:03:01", rs.URL("sec-token"), "")
	for _, args := range [][]string{
		{"--debug"},              // first registration
		{"--debug"},              // update, config unchanged
		{"--debug", "--dry-run"}, // prints the config it would apply
	} {
		cmd := exec.Command(agentBin, append([]string{"--root", m.Root, "--deadline", "10s", "--network-timeout", "10s"}, args...)...)
		cmd.Env = append(append(os.Environ(), host.EnvNmstatectl+"="+stub), m.Stub().Env()...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		text := out.String()
		if err != nil {
			t.Fatalf("agent %v: %v\n%s", args, err, text)
		}
		if !strings.Contains(text, "level=debug") {
			t.Fatalf("agent %v logged nothing at debug level:\n%s", args, text)
		}
		for _, s := range []string{secretToken, secretName, "SECRET-URL"} {
			if strings.Contains(text, s) {
				t.Errorf("agent %v output contains %s:\n%s", args, s, text)
			}
		}
		t.Logf("agent %v: %d bytes of output, %d lines, no secret", args, len(text), strings.Count(text, "\n"))
	}
	// The reference server runs with --debug too: its log must not show
	// the token it hands out either.
	if s := rs.Stderr.String(); strings.Contains(s, secretToken) {
		t.Errorf("regserver --debug logged the system-agent token:\n%s", s)
	}
}
