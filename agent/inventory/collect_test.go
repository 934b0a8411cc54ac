package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/vectors"
)

// vm1Addrs are the live addresses the vm1 fixture's interfaces would have;
// a fake tree has no kernel behind it.
func vm1Addrs(name string) ([]netip.Addr, error) {
	if name == "eth0" {
		return []netip.Addr{
			netip.MustParseAddr("192.0.2.10"),
			netip.MustParseAddr("2001:db8::10"),
			netip.MustParseAddr("fe80::5054:ff:fe12:3456"),
		}, nil
	}
	return nil, nil
}

func readJSON(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testLogger() (*logrus.Entry, *test.Hook) {
	l, hook := test.NewNullLogger()
	l.SetLevel(logrus.DebugLevel)
	return logrus.NewEntry(l), hook
}

func TestCollectFixtureVM1(t *testing.T) {
	log, hook := testLogger()
	inv, err := Collect(context.Background(), Options{Files: host.Root("testdata/vm1"), Log: log, InterfaceAddrs: vm1Addrs})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Degraded) != 0 {
		t.Fatalf("degraded: %v (logs: %v)", inv.Degraded, warnings(hook))
	}
	jsonEqual(t, inv.SystemDataV2, readJSON(t, "testdata/vm1.systemdatav2.json"))
	jsonEqual(t, inv.SMBIOS, readJSON(t, "testdata/vm1.smbios.json"))

	// Legacy payload: ghw's JSON names, lower-case enums, and no disk an
	// old server would reject (loop1 is dropped).
	var legacy struct {
		Memory struct {
			TotalPhysicalBytes int64 `json:"total_physical_bytes"`
		} `json:"memory"`
		CPU struct {
			TotalCores int `json:"total_cores"`
			Processors []struct {
				Vendor string `json:"vendor"`
			} `json:"processors"`
		} `json:"cpu"`
		Block struct {
			Disks []struct {
				Name       string `json:"name"`
				DriveType  string `json:"drive_type"`
				Controller string `json:"storage_controller"`
			} `json:"disks"`
		} `json:"block"`
		Network struct {
			NICs []struct {
				Name string `json:"name"`
				MAC  string `json:"mac_address"`
			} `json:"nics"`
		} `json:"network"`
		Runtime struct {
			Hostname string `json:"hostname"`
		} `json:"runtime"`
	}
	legacyJSON, err := inv.LegacySystemData()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(legacyJSON, &legacy); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(legacyJSON, &top)
	for _, k := range []string{"memory", "block", "cpu", "topology", "network", "gpu", "chassis", "bios", "baseboard", "product", "runtime"} {
		if _, ok := top[k]; !ok {
			t.Errorf("legacy system data lacks %q", k)
		}
	}
	if legacy.Memory.TotalPhysicalBytes != 268435456 || legacy.CPU.TotalCores != 2 ||
		len(legacy.CPU.Processors) != 1 || legacy.CPU.Processors[0].Vendor != "GenuineIntel" ||
		legacy.Runtime.Hostname != "node-1" || len(legacy.Network.NICs) != 4 {
		t.Errorf("legacy system data: %+v", legacy)
	}
	var disks []string
	for _, d := range legacy.Block.Disks {
		disks = append(disks, d.Name+"/"+d.DriveType+"/"+d.Controller)
	}
	if want := []string{"sda/hdd/scsi", "sr0/odd/scsi", "vda/ssd/virtio"}; !reflect.DeepEqual(disks, want) {
		t.Errorf("legacy disks = %v, want %v", disks, want)
	}
}

func warnings(h *test.Hook) []string {
	var out []string
	for _, e := range h.AllEntries() {
		if e.Level <= logrus.WarnLevel {
			out = append(out, e.Message)
		}
	}
	return out
}

// copyTree copies a fixture (symlinks as symlinks) so a test can break it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// without returns the expected vm1 map without the given families, their
// legacy subtrees emptied.
func vm1Without(t *testing.T, families map[string]string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(readJSON(t, "testdata/vm1.systemdatav2.json")), &m); err != nil {
		t.Fatal(err)
	}
	sd := m["System Data"].(map[string]any)
	for f, legacy := range families {
		delete(m, f)
		sd[legacy] = map[string]any{}
	}
	return m
}

func TestCollectBrokenModuleDegradesItsFamilyOnly(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(root string) error
		family string
		legacy string
	}{
		{"unreadable block tree", func(root string) error {
			if err := os.RemoveAll(host.Root(root).Path("/sys/block")); err != nil {
				return err
			}
			// A file where the directory should be cannot be listed, even by root.
			return os.WriteFile(host.Root(root).Path("/sys/block"), []byte("broken\n"), 0o644)
		}, FamilyStorage, "Block Devices"},
		{"no meminfo", func(root string) error {
			return os.Remove(host.Root(root).Path("/proc/meminfo"))
		}, FamilyMemory, "Memory"},
		{"no CPU tree", func(root string) error {
			return os.RemoveAll(host.Root(root).Path("/sys/devices/system/cpu"))
		}, FamilyCPU, "CPU"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copyTree(t, "testdata/vm1")
			if err := c.break_(root); err != nil {
				t.Fatal(err)
			}
			log, hook := testLogger()
			inv, err := Collect(context.Background(), Options{Files: host.Root(root), Log: log, InterfaceAddrs: vm1Addrs})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(inv.Degraded, []string{c.family}) {
				t.Fatalf("degraded = %v, want [%s]", inv.Degraded, c.family)
			}
			var lines []string
			for _, w := range warnings(hook) {
				if strings.Contains(w, c.family) {
					lines = append(lines, w)
				}
			}
			if len(lines) != 1 {
				t.Errorf("want one log line naming %s, got %q (all warnings: %q)", c.family, lines, warnings(hook))
			}
			b, _ := json.Marshal(vm1Without(t, map[string]string{c.family: c.legacy}))
			jsonEqual(t, inv.SystemDataV2, string(b))
		})
	}
}

// hungMeminfo is vm1 whose /proc/meminfo read never returns (a hung
// sysfs read, as a wedged driver gives), released when the test ends. It
// hangs in the edge's read: the edge refuses a FIFO, so a FIFO no longer
// stands for one.
func hungMeminfo(t *testing.T) host.FS {
	t.Helper()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return hangingFS{FS: host.Root("testdata/vm1"), path: "/proc/meminfo", release: release}
}

type hangingFS struct {
	host.FS
	path    string
	release chan struct{}
}

func (h hangingFS) ReadFile(p string, limit int64) ([]byte, error) {
	if p == h.path {
		<-h.release
		return nil, errors.New("released at the end of the test")
	}
	return h.FS.ReadFile(p, limit)
}

// A module that never returns (a FIFO nobody writes stands for a hung sysfs
// read) is cut off by the deadline; the others are still sent.
func TestCollectDeadlineCutsHungModule(t *testing.T) {
	files := hungMeminfo(t)
	log, hook := testLogger()
	// The deadline is the test's whole cost (the hung module waits it
	// out); the other modules need a few milliseconds of it.
	inv, err := Collect(context.Background(), Options{Files: files, Log: log, InterfaceAddrs: vm1Addrs, Deadline: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(inv.Degraded, []string{FamilyMemory}) {
		t.Fatalf("degraded = %v (warnings %q)", inv.Degraded, warnings(hook))
	}
	if w := warnings(hook); len(w) != 1 || !strings.Contains(w[0], "deadline") {
		t.Errorf("warnings = %q, want one naming the deadline", w)
	}
	if _, ok := inv.SystemDataV2["CPU"]; !ok {
		t.Error("CPU family missing although its module finished")
	}
}

func TestCollectNoSMBIOS(t *testing.T) {
	inv, err := Collect(context.Background(), Options{Files: host.Root("testdata/vm1"), NoSMBIOS: true, InterfaceAddrs: vm1Addrs})
	if err != nil {
		t.Fatal(err)
	}
	if inv.SMBIOS != nil {
		t.Errorf("SMBIOS collected although disabled: %v", inv.SMBIOS)
	}
}

func TestCollectBadRoot(t *testing.T) {
	if _, err := Collect(context.Background(), Options{Files: host.Root("testdata/does-not-exist")}); err == nil {
		t.Fatal("want an error for a missing root")
	}
}

// The upstream vector was captured on another machine, so values differ;
// the families, their keys and the kind of each value must not.
func TestSystemDataV2ShapeMatchesUpstreamVector(t *testing.T) {
	raw := vectors.Read(t, "upstream-systemdatav2.json")
	var vec map[string]any
	if err := json.Unmarshal(raw, &vec); err != nil {
		t.Fatal(err)
	}
	inv, err := Collect(context.Background(), Options{Files: host.Root("testdata/vm1"), InterfaceAddrs: vm1Addrs})
	if err != nil {
		t.Fatal(err)
	}
	var ours map[string]any
	b, _ := json.Marshal(inv.SystemDataV2)
	_ = json.Unmarshal(b, &ours)

	if got, want := slices.Sorted(maps.Keys(ours)), slices.Sorted(maps.Keys(vec)); !reflect.DeepEqual(got, want) {
		t.Fatalf("families = %v, upstream %v", got, want)
	}
	// Fixed-shape objects: same keys, same kinds.
	paths := [][]string{
		{"Product"}, {"BIOS"}, {"BaseBoard"}, {"Chassis"}, {"Memory"}, {"Runtime"},
		{"CPU"}, {"CPU", "Processor"}, {"CPU", "Processors", "0"},
		{"Network"}, {"Network", "NICs", "0"}, {"Network", "NICs", "eth0"},
		{"Storage"}, {"Storage", "Disks", "0"},
		{"System Data"}, {"System Data", "Memory"}, {"System Data", "CPU"}, {"System Data", "Runtime"},
		{"System Data", "Network", "eth0"},
	}
	for _, p := range paths {
		o, v := dig(ours, p), dig(vec, p)
		if o == nil || v == nil {
			t.Errorf("%v: ours %v, upstream %v", p, o != nil, v != nil)
			continue
		}
		if got, want := kinds(o), kinds(v); !reflect.DeepEqual(got, want) {
			t.Errorf("%v:\n ours     %v\n upstream %v", p, got, want)
		}
	}
	// Disk entries of the legacy tree, whatever the disk names.
	od := dig(ours, []string{"System Data", "Block Devices", "sda"})
	vd := dig(vec, []string{"System Data", "Block Devices", "vda"})
	if !reflect.DeepEqual(kinds(od), kinds(vd)) {
		t.Errorf("legacy disk: ours %v, upstream %v", kinds(od), kinds(vd))
	}
}

func dig(m map[string]any, path []string) map[string]any {
	cur := m
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// kinds maps each key to the JSON kind of its value.
func kinds(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		switch v.(type) {
		case string:
			out[k] = "string"
		case nil:
			out[k] = "null-or-string"
		case []any:
			out[k] = "array"
		case map[string]any:
			out[k] = "object"
		default:
			out[k] = "other"
		}
	}
	// PCIAddress is null or a string, depending on the bus.
	if _, ok := out["PCIAddress"]; ok {
		out["PCIAddress"] = "null-or-string"
	}
	return out
}

func TestCollectLive(t *testing.T) {
	log, hook := testLogger()
	inv, err := Collect(context.Background(), Options{Files: host.Root("/"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("degraded on this machine: %v; warnings: %q", inv.Degraded, warnings(hook))
	for _, f := range []string{FamilyCPU, FamilyMemory, FamilyRuntime, FamilyNetwork, FamilyStorage} {
		for _, d := range inv.Degraded {
			if d == f {
				t.Errorf("%s failed on live data", f)
			}
		}
	}
	cpu := inv.SystemDataV2["CPU"].(map[string]any)
	if cpu["TotalProcessors"] == "0" {
		t.Error("no processor on live data")
	}
	hostName, _ := os.Hostname()
	if got := inv.SystemDataV2["Runtime"].(map[string]any)["Hostname"]; got != hostName {
		t.Errorf("hostname %v, want %v", got, hostName)
	}
	if inv.SMBIOS == nil {
		t.Error("SMBIOS map is nil although enabled")
	}
	doc, err := Dump(inv, map[string]string{"a": "b"}, Annotations(AnnotationOptions{Files: host.Root("/"), Auth: "tpm"}))
	if err != nil {
		t.Fatal(err)
	}
	var back DumpDocument
	if err := json.Unmarshal(doc, &back); err != nil {
		t.Fatalf("dump is not JSON: %v", err)
	}
}

// BenchmarkCollect measures a whole collection on this machine's live data
// and reports the median next to Go's mean (docs/performance.md's target: ≤ 50 ms).
func BenchmarkCollect(b *testing.B) {
	var runs []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := Collect(context.Background(), Options{Files: host.Root("/")}); err != nil {
			b.Fatal(err)
		}
		runs = append(runs, time.Since(start))
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i] < runs[j] })
	b.ReportMetric(float64(runs[len(runs)/2].Microseconds())/1000, "median-ms")
}

// Without a PCI ID database the GPU family keeps its driver and drops the
// names, and says so once.
func TestCollectWithoutPCIIDs(t *testing.T) {
	root := copyTree(t, "testdata/vm1")
	if err := os.RemoveAll(host.Root(root).Path("/usr")); err != nil {
		t.Fatal(err)
	}
	log, hook := testLogger()
	inv, err := Collect(context.Background(), Options{Files: host.Root(root), Log: log, InterfaceAddrs: vm1Addrs})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Degraded) != 0 {
		t.Fatalf("degraded: %v", inv.Degraded)
	}
	jsonEqual(t, inv.SystemDataV2["GPU"], `{"TotalCards":"1","GraphicsCards":{"0":{"Driver":"bochs-drm"},"Driver":"bochs-drm"}}`)
	jsonEqual(t, inv.SystemDataV2["System Data"].(map[string]any)["GPU"], `{}`)
	var lines []string
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "pci.ids") {
			lines = append(lines, e.Message)
		}
	}
	if len(lines) != 1 {
		t.Errorf("want one line about the missing pci.ids, got %q", lines)
	}
}

// A collection its caller stops (the run ended long before the deadline)
// is no deadline: nothing is logged above debug, nothing says "deadline",
// and Stopped says why the inventory is partial.
func TestCollectStoppedIsNotADeadline(t *testing.T) {
	files := hungMeminfo(t)
	log, hook := testLogger()
	ctx, cancel := context.WithCancel(context.Background())
	// The hung module holds the collection open until the cancel; the
	// deadline is far away.
	time.AfterFunc(50*time.Millisecond, cancel)
	inv, err := Collect(ctx, Options{Files: files, Log: log, InterfaceAddrs: vm1Addrs, Deadline: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !Stopped(ctx) || !slices.Contains(inv.Degraded, FamilyMemory) {
		t.Fatalf("stopped %v, degraded %v", Stopped(ctx), inv.Degraded)
	}
	if w := warnings(hook); len(w) != 0 {
		t.Errorf("a stopped collection warned: %q", w)
	}
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "deadline") {
			t.Errorf("a cancellation labelled a deadline: %s", e.Message)
		}
	}
}
