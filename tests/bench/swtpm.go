package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// swtpm is one software TPM with fresh state on a private unix socket.
type swtpm struct {
	cmd    *exec.Cmd
	socket string
}

func haveSwtpm() bool {
	_, err := exec.LookPath("swtpm")
	return err == nil
}

// startSwtpm starts swtpm on fresh state; with ekCert the state is first
// provisioned by swtpm_setup with an EK certificate from a local CA, as
// real TPMs ship.
func startSwtpm(dir string, ekCert bool) (*swtpm, error) {
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("swtpm: %w", err)
	}
	if ekCert {
		if err := provisionEKCert(dir, state); err != nil {
			return nil, err
		}
	}
	s := &swtpm{socket: filepath.Join(dir, "data.sock")}
	cmd := exec.Command("swtpm", "socket", "--tpm2",
		"--server", "type=unixio,path="+s.socket,
		"--ctrl", "type=unixio,path="+s.socket+".ctrl",
		"--flags", "not-need-init,startup-clear",
		"--tpmstate", "dir="+state,
		"--log", "file="+filepath.Join(dir, "swtpm.log"))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("swtpm: starting: %w", err)
	}
	s.cmd = cmd
	// The probe connection is closed at once: swtpm serves one client.
	for i := 0; ; i++ {
		c, err := net.Dial("unix", s.socket)
		if err == nil {
			c.Close()
			return s, nil
		}
		if i == 200 {
			s.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "swtpm.log"))
			return nil, fmt.Errorf("swtpm: socket %s never came up: %w\n%s", s.socket, err, log)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (s *swtpm) device() string { return "unix://" + s.socket }

// stop ends our swtpm by its PID.
func (s *swtpm) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

func haveSwtpmSetup() bool {
	_, err := exec.LookPath("swtpm_setup")
	return err == nil
}

func provisionEKCert(dir, state string) error {
	ca := filepath.Join(dir, "ca")
	if err := os.MkdirAll(ca, 0o700); err != nil {
		return fmt.Errorf("swtpm_setup: %w", err)
	}
	files := map[string]string{
		"localca.conf":    fmt.Sprintf("statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca),
		"localca.options": "--platform-manufacturer nodereg\n--platform-version 2.1\n--platform-model bench\n",
	}
	files["setup.conf"] = fmt.Sprintf("create_certs_tool = /usr/bin/swtpm_localca\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = %s\n",
		filepath.Join(dir, "localca.conf"), filepath.Join(dir, "localca.options"))
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return fmt.Errorf("swtpm_setup: %w", err)
		}
	}
	cmd := exec.Command("swtpm_setup", "--tpm2", "--tpmstate", state, "--config", filepath.Join(dir, "setup.conf"),
		"--create-ek-cert", "--overwrite", "--logfile", filepath.Join(dir, "setup.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "setup.log"))
		return fmt.Errorf("swtpm_setup --create-ek-cert: %w\n%s\n%s", err, out, log)
	}
	return nil
}
