//go:build vmlab

package vm

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// theLab is the one lab of this run: one image, one namespace, one server.
var theLab *lab

// results collects each case's outcome for the closing "N passed, N failed".
var (
	resultsMu sync.Mutex
	results   []string
	passed    int
	failed    int
)

func TestMain(m *testing.M) {
	os.Exit(mainRun(m))
}

func mainRun(m *testing.M) int {
	if missing := missingTools(); missing != "" {
		fmt.Printf("vmlab: cannot run the VM lab: %s\n", missing)
		return 1
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		fmt.Println("vmlab:", err)
		return 1
	}
	l := &lab{repo: repo, imgDir: filepath.Join(repo, "bin/vm"), runDir: filepath.Join(repo, "bin/vm/run")}
	theLab = l
	_ = os.RemoveAll(l.runDir)
	if err := os.MkdirAll(l.runDir, 0o755); err != nil {
		fmt.Println("vmlab:", err)
		return 1
	}
	l.regCfg = filepath.Join(l.runDir, "regserver.yaml")
	l.regLog = filepath.Join(l.runDir, "regserver.log")
	l.store = filepath.Join(l.runDir, "regserver.db")
	// A stop from outside (CI's timeout, ^C) still stops every QEMU,
	// swtpm and the namespace.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Printf("vmlab: %s: stopping every QEMU, swtpm and the namespace\n", s)
		l.cleanup()
		os.Exit(1)
	}()
	defer l.cleanup()
	if err := prepare(l); err != nil {
		fmt.Printf("vmlab: cannot run the VM lab: %v\n", err)
		return 1
	}
	code := m.Run()
	resultsMu.Lock()
	// Every power-on's serial log, whatever case it belonged to: a mount
	// usage error means the initramfs did not build the lab's layout.
	logs, _ := filepath.Glob(filepath.Join(l.runDir, "*", "serial-*.log"))
	for _, s := range logs {
		if b, err := os.ReadFile(s); err == nil && mountUsage.Match(b) {
			results = append(results, "vmlab: FAIL "+s+" holds a mount usage error (the initramfs' layout script failed)")
			failed++
		}
	}
	for _, r := range results {
		fmt.Println(r)
	}
	fmt.Printf("vmlab: artefacts (serial logs, journals, regserver log) under %s\n", l.runDir)
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		code = 1
	}
	resultsMu.Unlock()
	return code
}

// missingTools names what the lab cannot run without, in one line.
func missingTools() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, taps, mkfs of the guest image)"
	}
	var miss []string
	for _, t := range []string{"qemu-system-x86_64", "qemu-img", "swtpm", "mmdebstrap", "mkfs.ext4", "ip", "ping", "dnsmasq"} {
		if _, err := exec.LookPath(t); err != nil {
			miss = append(miss, t)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		miss = append(miss, "/dev/net/tun")
	}
	if len(miss) > 0 {
		return "missing " + strings.Join(miss, ", ") + " (apt-get install qemu-system-x86 qemu-utils mmdebstrap ipxe-qemu seabios swtpm swtpm-tools iputils-ping dnsmasq-base)"
	}
	return ""
}

// prepare builds the binaries and the image (once for every case) and the
// lab's network.
func prepare(l *lab) error {
	t0 := time.Now()
	// From the build every package of the run shares, as the regserver
	// the lab starts (labkit); the image's agent is its .deb, which
	// build.sh makes.
	yiprun, err := testbin.Path("./tests/vm/yiprun")
	if err != nil {
		return err
	}
	b, err := os.ReadFile(yiprun)
	if err != nil {
		return err
	}
	// Where the image's build.sh takes it from.
	if err := os.MkdirAll(l.imgDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.imgDir, "yiprun"), b, 0o755); err != nil {
		return err
	}
	reuse := os.Getenv("NODEREG_VM_REUSE_IMAGE") == "1"
	if _, err := os.Stat(filepath.Join(l.imgDir, "base.img")); err != nil || !reuse {
		c := exec.Command(filepath.Join(l.repo, "tests/vm/image/build.sh"), l.imgDir)
		c.Dir = l.repo
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("guest image (tests/vm/image/build.sh): %w", err)
		}
	}
	fmt.Printf("vmlab: binaries and image ready in %.1fs\n", time.Since(t0).Seconds())
	if err := l.setupNet(); err != nil {
		return err
	}
	return l.startServer(serverConfig(templates{}))
}

// runCase runs one named case, prints its verdict and duration, and counts
// it for the closing line.
func runCase(t *testing.T, fn func(t *testing.T)) {
	start := time.Now()
	t.Cleanup(func() {
		verdict := "PASS"
		if t.Failed() {
			verdict = "FAIL"
		}
		line := fmt.Sprintf("vmlab: %s %s (%.1fs)", verdict, t.Name(), time.Since(start).Seconds())
		fmt.Println(line)
		resultsMu.Lock()
		results = append(results, line)
		if t.Failed() {
			failed++
		} else {
			passed++
		}
		resultsMu.Unlock()
	})
	fn(t)
}

// fail reports err, keeping the machine's journal; the message names where
// the serial logs and journal are.
func fail(t *testing.T, m *machine, step string, err error) {
	t.Helper()
	dir := theLab.runDir
	if m != nil {
		dir = m.saveLogs(strings.ReplaceAll(t.Name(), "/", "_"))
	}
	t.Fatalf("%s: %v\n(serial logs and journal kept under %s)", step, err, dir)
}

// selected says whether case c (B1...) runs in this lab run (run.sh's
// VM_CASES; all when unset): a machine no later selected case goes on with
// is powered off at once rather than kept running beside the next cases.
func selected(c string) bool {
	sel := strings.Fields(os.Getenv("VMLAB_SELECTED"))
	if len(sel) == 0 {
		return true
	}
	for _, s := range sel {
		if s == c {
			return true
		}
	}
	return false
}
