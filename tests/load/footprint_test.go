package load

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/vectors"
	"github.com/nodereg/nodereg/protocol"
)

// Goals (docs/reliability.md, "Load") for 1,000 PLAIN registrations with the vectors'
// payloads.
const (
	goalPeakRSS          = 200 << 20
	goalHardwarePerEntry = 64 << 10
)

// vectorPayloads are elemental-register's captured payloads, with the
// SMBIOS UUID made the machine's own.
func vectorPayloads(t testing.TB) func(id string) *protocol.Payloads {
	var smbios, sysData map[string]any
	var ann map[string]string
	node.Must(t, json.Unmarshal(vectors.Read(t, "upstream-smbios.json"), &smbios))
	node.Must(t, json.Unmarshal(vectors.Read(t, "upstream-systemdatav2.json"), &sysData))
	node.Must(t, json.Unmarshal(vectors.Read(t, "upstream-annotations.json"), &ann))
	return func(id string) *protocol.Payloads {
		s := make(map[string]any, len(smbios))
		for k, v := range smbios {
			s[k] = v
		}
		sys := map[string]any{}
		if old, ok := smbios["System Information"].(map[string]any); ok {
			for k, v := range old {
				sys[k] = v
			}
		}
		sys["UUID"] = id
		s["System Information"] = sys
		return &protocol.Payloads{SMBIOS: s, SystemDataV2: sysData, Annotations: ann}
	}
}

// procKB reads a VmXXX line of /proc/<pid>/status, in bytes.
func procKB(t testing.TB, pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	node.Must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			node.Must(t, err)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// TestFootprint1000PLAIN: bin/regserver as a process, 1,000 PLAIN
// registrations at once with the vectors' payloads; reports the server's
// peak RSS, the store's size and the hardware data kept per inventory, and
// holds them to those goals.
func TestFootprint1000PLAIN(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "regserver.yaml")
	node.Must(t, os.WriteFile(cfg, []byte(serverConfig), 0o600))
	storePath := filepath.Join(dir, "store.db")
	// One client address plays all 1,000 machines: per-client limits off.
	rs := labkit.StartRegserver(t, "--config", cfg, "--store", storePath, "--listen", "127.0.0.1:0", "--no-tpm",
		"--max-client-sessions", "0", "--new-inventories-per-minute", "0", "--max-pending-inventories", "0")
	pid := rs.Cmd.Process.Pid
	idleRSS := procKB(t, pid, "VmRSS")

	payloads := vectorPayloads(t)
	url := rs.URL("load-token")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	// 1,000 at once meet the server's 128 session slots: those refused
	// with 503 come back as the agent would.
	var retries atomic.Int64
	errs := testutil.Concurrently(n, func(i int) error {
		id := mac(i)
		attempts, err := asTheAgent(ctx, func(ctx context.Context) error {
			cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, SessionDeadline: time.Minute, HandshakeTimeout: time.Minute}, protocol.Plain{AuthKind: "mac", ID: id})
			if err != nil {
				return err
			}
			defer cc.Close()
			var c protocol.Config
			reply, err := cc.Register(ctx, payloads(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)), &c)
			if err == nil && (reply.Network == nil || reply.Network.IPAddresses["inventory-ip"] == "") {
				err = errclass.Wrap(errclass.Final, "", fmt.Errorf("%s: no address", id)) // not the load: final
			}
			return err
		})
		retries.Add(int64(attempts - 1))
		return err
	})
	took := time.Since(start)
	for _, err := range errs {
		t.Fatalf("registration: %v\n%s", err, rs.Stderr.String())
	}
	peak := procKB(t, pid, "VmHWM")
	rs.Kill()
	fi, err := os.Stat(storePath)
	node.Must(t, err)

	out, err := exec.Command(rs.Bin, "store", "export", "--store", storePath).Output()
	node.Must(t, err)
	var dump struct {
		Inventories map[string]struct {
			SMBIOS     map[string]any `json:"smbios"`
			SystemData map[string]any `json:"systemData"`
		} `json:"inventories"`
	}
	node.Must(t, json.Unmarshal(out, &dump))
	if len(dump.Inventories) != n {
		t.Fatalf("store holds %d inventories, want %d", len(dump.Inventories), n)
	}
	maxHW := 0
	for _, inv := range dump.Inventories {
		b, err := json.Marshal(inv)
		node.Must(t, err)
		maxHW = max(maxHW, len(b))
	}
	t.Logf("%d retried attempts", retries.Load())
	t.Logf("%d PLAIN registrations at once in %s (%.0f/s); regserver RSS idle %.1f MiB, peak %.1f MiB; store %.1f MiB (%.1f KiB per inventory); hardware data per inventory at most %.1f KiB",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(idleRSS)/(1<<20), float64(peak)/(1<<20),
		float64(fi.Size())/(1<<20), float64(fi.Size())/float64(n)/1024, float64(maxHW)/1024)
	if peak > goalPeakRSS {
		t.Errorf("peak RSS %.1f MiB, goal %d MiB", float64(peak)/(1<<20), goalPeakRSS>>20)
	}
	if maxHW > goalHardwarePerEntry {
		t.Errorf("hardware data of %d bytes for one inventory, goal %d", maxHW, goalHardwarePerEntry)
	}
}
