package hostile

import (
	"strings"
	"testing"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// TestDryRunPrintsServerStringsEscaped: a server's strings holding ESC
// sequences (set the window title, clear the screen) and a BEL, in what a
// dry run of an install prints (the install command with the server's
// device, the system-agent's files) and logs, reach the terminal of the
// real agent escaped as %q does (docs/reliability.md).
func TestDryRunPrintsServerStringsEscaped(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n" +
		"    install:\n        device: \"/dev/sda\\e]0;owned\\a\"\n        poweroff: true\n" +
		"    system-agent:\n        url: \"https://rancher.example/\\e[2J\"\n        token: tok\n        secret-name: \"sn\\e[2J\\e[H\"\n        secret-namespace: ns\n"),
		Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:15:00:37", url, "")
	_, stdout, _, stderr := runBinaryAll(t, bin, []string{host.EnvElemental + "=" + testbin.Build(t, "./tests/stubs/elemental")}, "--root", m.Root, "--dry-run", "--install", "--config-path", host.ConfigFile, "--deadline", "5s", "--network-timeout", "5s")
	all := stdout + stderr
	if strings.ContainsAny(all, "\x1b\a") {
		t.Errorf("a raw control character reached the terminal:\n%q", all)
	}
	// The install command a dry run prints names the server's device.
	if !strings.Contains(stdout, `ELEMENTAL_INSTALL_TARGET=/dev/sda\x1b]0;owned\a`) {
		t.Errorf("the server's install device is not shown escaped:\n%s", stdout)
	}
}
