//go:build vmlab

package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// machine is one guest: its vTPM state (its identity), its /oem disk and its
// root overlay survive its reboots; QEMU and swtpm are started per power-on.
type machine struct {
	l       *lab
	name    string
	dir     string
	uuid    string
	macs    []string
	taps    []string
	root    string // qcow2 overlay of base.img
	oem     string // raw ext4, label OEM
	tpmDir  string
	qga     qga
	qmp     string
	qemu    *exec.Cmd
	swtpm   *exec.Cmd
	powerOn time.Time
	boots   int
	serials []string
	tpmLog  string // swtpm's log of this power-on (every command, level 20)
	tpmMark int    // commands in tpmLog before the current boot
	mode    string // elemental.mode of the current power-on
	keepEtc bool   // vmlab.etc=keep: /etc on the root, kept across boots
}

// newMachine prepares a machine with nics NICs and an /oem holding files
// (path under /oem -> content).
func (l *lab) newMachine(name string, idx, nics int, oemFiles map[string]string) (*machine, error) {
	m := &machine{l: l, name: name, dir: filepath.Join(l.runDir, name)}
	m.uuid = fmt.Sprintf("6b1d2f00-0000-4000-8000-0000000000%02x", idx)
	for i := 0; i < nics; i++ {
		m.macs = append(m.macs, macOf(idx, i))
		tap := fmt.Sprintf("t%s%d", name, i)
		if err := l.addTap(tap); err != nil {
			return nil, fmt.Errorf("machine %s: %w", name, err)
		}
		m.taps = append(m.taps, tap)
	}
	m.tpmDir = filepath.Join(m.dir, "tpmstate")
	oemDir := filepath.Join(m.dir, "oem-seed")
	for _, d := range []string{m.tpmDir, oemDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	for p, content := range oemFiles {
		full := filepath.Join(oemDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	m.oem = filepath.Join(m.dir, "oem.img")
	if err := l.sh("mkfs.ext4", "-q", "-F", "-L", "OEM", "-d", oemDir, m.oem, "64M"); err != nil {
		return nil, err
	}
	if err := m.newRoot("root.qcow2"); err != nil {
		return nil, err
	}
	m.qga = qga{sock: filepath.Join(m.dir, "qga.sock")}
	m.qmp = filepath.Join(m.dir, "qmp.sock")
	return m, nil
}

// macOf is the MAC of NIC i of machine idx (the bootstrap config matches it).
func macOf(idx, i int) string { return fmt.Sprintf("52:54:00:31:%02x:%02x", idx, i+2) }

// newRoot gives the machine a fresh root overlay: the installed image, or
// the recovery image (the same base, no state of the active system).
func (m *machine) newRoot(name string) error {
	m.root = filepath.Join(m.dir, name)
	_ = os.Remove(m.root)
	return m.l.sh("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(m.l.imgDir, "base.img"), "-F", "raw", m.root)
}

// start powers the machine on in elemental mode mode (active, passive,
// recovery): swtpm on the machine's TPM state, then QEMU inside the lab
// namespace with direct kernel boot.
func (m *machine) start(mode string) error {
	m.boots++
	m.mode = mode
	sock := filepath.Join(m.dir, "swtpm.sock")
	_ = os.Remove(sock)
	// Level 20 logs every command swtpm reads: the lab counts them per
	// boot (docs/proven.md).
	m.tpmLog, m.tpmMark = filepath.Join(m.dir, fmt.Sprintf("swtpm-%d.log", m.boots)), 0
	// The log goes through a pipe the lab stamps (tpmlog_test.go).
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	m.swtpm = exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+m.tpmDir,
		"--ctrl", "type=unixio,path="+sock, "--log", "fd=3,level=20",
		"--pid", "file="+filepath.Join(m.dir, "swtpm.pid"))
	m.swtpm.ExtraFiles = []*os.File{pw}
	err = m.swtpm.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return fmt.Errorf("swtpm: %w", err)
	}
	go stampTPMLog(pr, m.tpmLog)
	m.l.track(m.swtpm)
	if err := waitFor("swtpm's control socket "+sock, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return err
	}
	serial := filepath.Join(m.dir, fmt.Sprintf("serial-%d.log", m.boots))
	m.serials = append(m.serials, serial)
	img := m.l.imgDir
	cmdline := "root=/dev/vda ro console=ttyS0 net.ifnames=0 elemental.mode=" + mode
	if m.keepEtc {
		cmdline += " vmlab.etc=keep"
	}
	args := []string{"qemu-system-x86_64", "-name", m.name,
		"-accel", "tcg,thread=multi,tb-size=256", "-smp", "2", "-m", "1024",
		"-display", "none", "-no-user-config", "-nodefaults", "-uuid", m.uuid,
		"-chardev", "file,id=ser0,path=" + serial, "-serial", "chardev:ser0",
		"-kernel", filepath.Join(img, "vmlinuz"), "-initrd", filepath.Join(img, "initrd.img"),
		"-append", cmdline,
		"-drive", "file=" + m.root + ",if=virtio,format=qcow2",
		"-drive", "file=" + m.oem + ",if=virtio,format=raw",
		"-chardev", "socket,id=chrtpm,path=" + sock, "-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
		"-device", "tpm-tis,tpmdev=tpm0",
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=qga0,path=" + m.qga.sock + ",server=on,wait=off",
		"-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
		"-qmp", "unix:" + m.qmp + ",server=on,wait=off",
		"-pidfile", filepath.Join(m.dir, "qemu.pid"),
	}
	for i, tap := range m.taps {
		args = append(args, "-netdev", fmt.Sprintf("tap,id=n%d,ifname=%s,script=no,downscript=no", i, tap),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=%s,romfile=", i, m.macs[i]))
	}
	argv := m.l.inNS(args...)
	m.qemu = exec.Command(argv[0], argv[1:]...)
	qlog, err := os.OpenFile(filepath.Join(m.dir, "qemu.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	m.qemu.Stdout, m.qemu.Stderr = qlog, qlog
	m.powerOn = time.Now()
	err = m.qemu.Start()
	qlog.Close()
	if err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	m.l.track(m.qemu)
	return nil
}

// waitUp waits until the guest agent answers, bounded by bootBound, and
// checks the boot's layout.
func (m *machine) waitUp() error {
	if err := m.waitAgent(); err != nil {
		return err
	}
	return m.checkLayout()
}

// waitAgent waits until the guest agent answers, bounded by bootBound.
func (m *machine) waitAgent() error {
	return waitFor(m.name+"'s guest agent after power-on/reboot", bootBound, func() (bool, string) {
		if m.qemu.ProcessState != nil {
			return false, "qemu exited"
		}
		err := m.qga.ping()
		return err == nil, fmt.Sprint(err)
	})
}

// bootID is the guest kernel's boot id.
func (m *machine) bootID() (string, error) {
	r, err := m.qga.run("cat /proc/sys/kernel/random/boot_id", commandBound)
	return strings.TrimSpace(r.Stdout), err
}

// reboot reboots the guest for real (systemctl reboot; QEMU and swtpm stay)
// and waits until a new boot answers.
func (m *machine) reboot() error {
	old, err := m.bootID()
	if err != nil {
		return err
	}
	m.tpmMark = m.tpmCommandsTotal()
	if err := m.qga.fire("systemctl reboot"); err != nil {
		return err
	}
	m.powerOn = time.Now()
	err = waitFor(m.name+" to come back from systemctl reboot with a new boot id", bootBound, func() (bool, string) {
		id, err := m.bootID()
		return err == nil && id != "" && id != old, fmt.Sprintf("boot id %q (old %q) %v", id, old, err)
	})
	if err != nil {
		return err
	}
	return m.checkLayout()
}

// poweroff shuts the guest down and waits for QEMU and swtpm to exit; past
// the bound they are killed.
func (m *machine) poweroff() error {
	if m.qemu == nil || m.qemu.ProcessState != nil {
		return nil
	}
	_ = m.qga.fire("systemctl poweroff")
	done := make(chan error, 1)
	go func() { done <- m.qemu.Wait() }()
	var err error
	select {
	case <-done:
	case <-time.After(powerBound):
		err = fmt.Errorf("%s: QEMU still running %s after systemctl poweroff; killed", m.name, powerBound)
		_ = m.qemu.Process.Kill()
		<-done
	}
	stopProc(m.swtpm, 10*time.Second)
	return err
}

// tpmCommandsTotal counts the TPM commands swtpm has read since this
// power-on (firmware, kernel and every user of the TPM alike).
func (m *machine) tpmCommandsTotal() int {
	b, err := os.ReadFile(m.tpmLog)
	if err != nil {
		return -1
	}
	return strings.Count(string(b), "SWTPM_IO_Read:")
}

// tpmCommands counts the TPM commands of the current boot so far.
func (m *machine) tpmCommands() int { return m.tpmCommandsTotal() - m.tpmMark }

// run runs cmd in the guest, failing on a transport error.
func (m *machine) run(cmd string) (execResult, error) {
	return m.qga.run(cmd, commandBound)
}

// must runs cmd in the guest and wants exit 0; it returns stdout.
func (m *machine) must(cmd string) (string, error) {
	r, err := m.run(cmd)
	if err != nil {
		return "", err
	}
	if r.Code != 0 {
		return r.Stdout, fmt.Errorf("guest: %q: %s", cmd, r)
	}
	return r.Stdout, nil
}

// unit reads properties of a systemd unit in the guest.
func (m *machine) unit(name string, props ...string) (map[string]string, error) {
	args := "systemctl show " + name
	for _, p := range props {
		args += " -p " + p
	}
	out, err := m.must(args)
	if err != nil {
		return nil, err
	}
	kv := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv, nil
}

// usec parses a systemd *Monotonic property (microseconds since boot).
func usec(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v / 1e6
}

// saveLogs keeps the current boot's journal beside the serial logs; the
// case's failure message names the directory.
func (m *machine) saveLogs(label string) string {
	if m.qemu != nil && m.qemu.ProcessState == nil {
		if r, err := m.qga.run("journalctl -b --no-pager -o short-monotonic", commandBound); err == nil {
			_ = os.WriteFile(filepath.Join(m.dir, "journal-"+label+".txt"), []byte(r.Stdout), 0o644)
		}
	}
	return m.dir
}
