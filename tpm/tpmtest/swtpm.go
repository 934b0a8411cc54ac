// Package tpmtest starts real software TPMs for tests: swtpm on a private
// unix socket, optionally provisioned with an EK certificate by swtpm_setup.
package tpmtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Swtpm is one running swtpm with its own state directory.
type Swtpm struct {
	Dir    string // state, sockets, CA material
	Socket string // data socket
	// CACert is the PEM file of the CA that signed the EK certificate
	// (empty without one).
	CACert string
	cmd    *exec.Cmd
}

// Device is the tpm.Options.Device value for this swtpm.
func (s *Swtpm) Device() string { return "unix://" + s.Socket }

// StartSwtpm starts `swtpm socket --tpm2` in a temp dir and stops it (by PID)
// when the test ends. With ekCert, the state is first provisioned by
// `swtpm_setup --create-ek-cert` with a CA of its own. The test is skipped
// when swtpm (Debian: swtpm swtpm-tools) is not installed.
func StartSwtpm(t testing.TB, ekCert bool) *Swtpm {
	t.Helper()
	if _, err := exec.LookPath("swtpm"); err != nil {
		t.Skip("swtpm not installed (apt-get install swtpm swtpm-tools)")
	}
	dir := t.TempDir()
	s := &Swtpm{Dir: dir, Socket: filepath.Join(dir, "data.sock")}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if ekCert {
		s.provision(t, state)
	}
	s.Start(t)
	return s
}

func (s *Swtpm) provision(t testing.TB, state string) {
	t.Helper()
	if _, err := exec.LookPath("swtpm_setup"); err != nil {
		t.Skip("swtpm_setup not installed (apt-get install swtpm-tools)")
	}
	ca := filepath.Join(s.Dir, "ca")
	if err := os.Mkdir(ca, 0o700); err != nil {
		t.Fatal(err)
	}
	s.CACert = filepath.Join(ca, "issuercert.pem")
	write := func(name, content string) string {
		p := filepath.Join(s.Dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	localca := write("swtpm-localca.conf", fmt.Sprintf(
		"statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca))
	opts := write("swtpm-localca.options", "--platform-manufacturer nodereg\n--platform-version 2.1\n--platform-model test\n")
	setup := write("swtpm_setup.conf", fmt.Sprintf(
		"create_certs_tool = /usr/bin/swtpm_localca\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = %s\n", localca, opts))
	cmd := exec.Command("swtpm_setup", "--tpm2", "--tpmstate", state, "--config", setup,
		"--create-ek-cert", "--overwrite", "--logfile", filepath.Join(s.Dir, "setup.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "setup.log"))
		t.Fatalf("swtpm_setup: %v\n%s\n%s", err, out, log)
	}
}

// Start (re)starts swtpm on the same state.
func (s *Swtpm) Start(t testing.TB) {
	t.Helper()
	os.Remove(s.Socket)
	cmd := exec.Command("swtpm", "socket", "--tpm2",
		"--server", "type=unixio,path="+s.Socket,
		"--ctrl", "type=unixio,path="+s.Socket+".ctrl",
		"--flags", "startup-clear",
		"--tpmstate", "dir="+filepath.Join(s.Dir, "state"),
		"--log", "file="+filepath.Join(s.Dir, "swtpm.log"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting swtpm: %v", err)
	}
	s.cmd = cmd
	t.Cleanup(func() { s.Stop(t) })
	// Wait for the socket to accept; the probe connection is closed at once
	// so it does not hold swtpm's single client slot.
	for i := 0; ; i++ {
		c, err := net.Dial("unix", s.Socket)
		if err == nil {
			c.Close()
			return
		}
		if i == 200 {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "swtpm.log"))
			t.Fatalf("swtpm socket never came up: %v\n%s", err, log)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Stop terminates this swtpm by its PID and waits for it; idempotent.
func (s *Swtpm) Stop(t testing.TB) {
	if s.cmd == nil {
		return
	}
	cmd := s.cmd
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
