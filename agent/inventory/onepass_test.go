package inventory

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/baseboard"
	"github.com/jaypipes/ghw/pkg/bios"
	"github.com/jaypipes/ghw/pkg/block"
	"github.com/jaypipes/ghw/pkg/chassis"
	"github.com/jaypipes/ghw/pkg/memory"
	"github.com/jaypipes/ghw/pkg/net"
	"github.com/jaypipes/ghw/pkg/product"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
)

// countingFS is the host edge with a tally of every read that reaches it.
type countingFS struct {
	host.FS
	mu sync.Mutex
	n  map[string]int
}

func newCountingFS(files host.FS) *countingFS { return &countingFS{FS: files, n: map[string]int{}} }

func (c *countingFS) count(op, p string) {
	c.mu.Lock()
	c.n[op+" "+path.Clean(p)]++
	c.mu.Unlock()
}

func (c *countingFS) ReadFile(p string, limit int64) ([]byte, error) {
	c.count("read", p)
	return c.FS.ReadFile(p, limit)
}

func (c *countingFS) ReadDir(p string) ([]fs.DirEntry, error) {
	c.count("readdir", p)
	return c.FS.ReadDir(p)
}

func (c *countingFS) Readlink(p string) (string, error) {
	c.count("readlink", p)
	return c.FS.Readlink(p)
}

func (c *countingFS) Stat(p string) (fs.FileInfo, error) {
	c.count("stat", p)
	return c.FS.Stat(p)
}

func (c *countingFS) Lstat(p string) (fs.FileInfo, error) {
	c.count("lstat", p)
	return c.FS.Lstat(p)
}

func (c *countingFS) Open(p string, limit int64) (io.ReadCloser, error) {
	c.count("open", p)
	return c.FS.Open(p, limit)
}

// TestInventoryReadsEachFileOnce counts the reads that reach the host
// edge during one collection (with the legacy tree, which an old server
// asks for): none is made twice, and the files the families share (a
// disk's dev number and udev record, /proc/meminfo) do come through it.
func TestInventoryReadsEachFileOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		root host.FS
		must []string
	}{
		{"vm1", host.Root("testdata/vm1"), []string{
			"read /proc/meminfo", "read /sys/block/sda/dev", "read /run/udev/data/b8:0",
			"readdir /sys/block", "read /sys/devices/system/memory/block_size_bytes",
		}},
		{"rich tree", host.Root(richTree(t)), []string{
			"read /proc/meminfo", "read /proc/self/mounts", "read /sys/block/vda/dev", "read /sys/block/vda/vda1/dev",
			"read /run/udev/data/b253:0", "read /run/udev/data/b253:1", "readlink /sys/block/vda",
			"readdir /sys/kernel/mm/hugepages", "read /sys/class/dmi/id/product_uuid", "read /sys/class/dmi/id/chassis_type",
			"readdir /sys/class/net", "read /sys/class/net/eth1/address", "readlink /sys/class/net/eth1",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := newCountingFS(c.root)
			inv, err := Collect(context.Background(), Options{Files: files, InterfaceAddrs: vm1Addrs})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inv.LegacySystemData(); err != nil {
				t.Fatal(err)
			}
			for k, n := range files.n {
				if n > 1 {
					t.Errorf("%s: %d times in one run", k, n)
				}
			}
			for _, k := range c.must {
				if files.n[k] != 1 {
					t.Errorf("%s: %d times through the edge, want once", k, files.n[k])
				}
			}
		})
	}
}

// TestInventoryBytesMatchVectors: the two maps the agent sends, encoded
// as the conversation encodes them (encoding/json), are byte for byte the
// repository's vectors for the vm1 snapshot, in their canonical encoding.
func TestInventoryBytesMatchVectors(t *testing.T) {
	inv, err := Collect(context.Background(), Options{Files: host.Root("testdata/vm1"), InterfaceAddrs: vm1Addrs})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		vector string
		sent   any
	}{
		{"testdata/vm1.systemdatav2.json", inv.SystemDataV2},
		{"testdata/vm1.smbios.json", inv.SMBIOS},
	} {
		got, err := json.Marshal(c.sent)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal([]byte(readJSON(t, c.vector)), &v); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(v)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: sent bytes differ\n got %s\nwant %s", c.vector, got, want)
		}
	}
}

// TestDecodersMatchGhw: the Storage, Memory, Network and DMI identity families decoded from the
// snapshot are what ghw 0.27 itself returns for the same tree, on the
// vm1 snapshot, on a tree with partitions, mounts, links and huge pages,
// and on the machine the test runs on.
func TestDecodersMatchGhw(t *testing.T) {
	roots := map[string]string{"vm1": "testdata/vm1", "rich tree": richTree(t), "live": "/"}
	for name, root := range roots {
		t.Run(name, func(t *testing.T) {
			opts := []any{ghw.WithChroot(root), ghw.WithDisableTools(), ghw.WithLogger(slog.New(slog.DiscardHandler))}
			files := host.NewSnapshot(host.Root(root))
			log, _ := testLogger()

			wantBlock, err := block.New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := collectBlock(files, log); !reflect.DeepEqual(got, wantBlock) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(wantBlock)
				t.Errorf("block:\n ours %s\n ghw  %s", g, w)
			}

			for _, c := range []struct {
				family    string
				ours, ghw func() (any, error)
			}{
				{"product", func() (any, error) { return collectProduct(files, opts) }, func() (any, error) { return product.New(opts...) }},
				{"bios", func() (any, error) { return collectBIOS(files, opts) }, func() (any, error) { return bios.New(opts...) }},
				{"baseboard", func() (any, error) { return collectBaseboard(files, opts) }, func() (any, error) { return baseboard.New(opts...) }},
				{"chassis", func() (any, error) { return collectChassis(files, opts) }, func() (any, error) { return chassis.New(opts...) }},
				{"network", func() (any, error) { return collectNICs(files), nil }, func() (any, error) { return net.New(opts...) }},
			} {
				got, gotErr := c.ours()
				want, wantErr := c.ghw()
				if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n ours %+v (%v)\n ghw  %+v (%v)", c.family, got, gotErr, want, wantErr)
				}
			}

			wantMem, wantErr := memory.New(opts...)
			gotMem, gotErr := collectMemory(files)
			if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(gotMem, wantMem) {
				g, _ := json.Marshal(gotMem)
				w, _ := json.Marshal(wantMem)
				t.Errorf("memory:\n ours %s (%v)\n ghw  %s (%v)", g, gotErr, w, wantErr)
			}
		})
	}
}

// richTree is a machine with what vm1 lacks: disks that are links into
// /sys/devices (one with a numa_node beside it), partitions mounted and
// not, an escaped mount point, udev records for both, an unused and a
// used loop device, memory blocks on and off line, and huge pages.
func richTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		testutil.WriteFile(t, root, p, s, 0o644)
	}
	link := func(p, target string) {
		t.Helper()
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, f); err != nil {
			t.Fatal(err)
		}
	}
	write("/proc/meminfo", "MemTotal:        4026532 kB\nMemFree:         1000000 kB\nHugePages_Total:       4\nHugepagesize:       2048 kB\nHugetlb:            8192 kB\n")
	write("/proc/self/mounts", "proc /proc proc rw,nosuid 0 0\n/dev/vda1 /mnt/with\\040space ext4 rw,relatime 0 0\n/dev/vda1 /again xfs ro 0 0\n/dev/nvme0n1p1 /boot vfat ro,noatime 0 0\n")
	write("/sys/devices/system/memory/block_size_bytes", "8000000\n")
	write("/sys/devices/system/memory/memory0/state", "online\n")
	write("/sys/devices/system/memory/memory1/state", "offline\n")
	write("/sys/devices/system/memory/memory12/state", "online\n")
	write("/sys/devices/system/memory/power/state", "x\n")
	for _, hp := range []string{"hugepages-2048kB", "hugepages-1048576kB"} {
		write("/sys/kernel/mm/hugepages/"+hp+"/nr_hugepages", "4\n")
		write("/sys/kernel/mm/hugepages/"+hp+"/free_hugepages", "3\n")
		write("/sys/kernel/mm/hugepages/"+hp+"/surplus_hugepages", "0\n")
		write("/sys/kernel/mm/hugepages/"+hp+"/resv_hugepages", "1\n")
	}

	vda := "/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda"
	write(vda+"/dev", "253:0\n")
	write(vda+"/size", "41943040\n")
	write(vda+"/removable", "0\n")
	write(vda+"/queue/rotational", "1\n")
	write(vda+"/queue/physical_block_size", "4096\n")
	write(vda+"/queue/logical_block_size", "512\n")
	write(vda+"/device/vendor", "0x1af4  \n")
	write(vda+"/vda1/dev", "253:1\n")
	write(vda+"/vda1/size", "2048\n")
	write(vda+"/vda2/dev", "253:2\n")
	write(vda+"/vda2/size", "4096\n")
	write(vda+"/vda3/size", "8\n") // no dev: no udev record
	link("/sys/block/vda", "../devices/pci0000:00/0000:00:04.0/virtio1/block/vda")
	write("/run/udev/data/b253:0", "S:disk/by-path/pci-0000:00:04.0\nE:ID_PATH=pci-0000:00:04.0\nE:ID_MODEL=QEMU disk\nE:ID_SERIAL=QM0001\nE:ID_SERIAL_SHORT=0001\nE:ID_WWN=0x5000\nE:ID_WWN_WITH_EXTENSION=0x5000c5\nE:BROKEN\n")
	write("/run/udev/data/b253:1", "E:ID_PART_ENTRY_UUID=1111-aaaa\nE:ID_PART_ENTRY_NAME=boot\nE:ID_FS_TYPE=ext4\nE:ID_FS_LABEL=BOOT=1\n")
	write("/run/udev/data/b253:2", "E:ID_FS_TYPE=swap\n")

	nvme := "/sys/devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1"
	write(nvme+"/dev", "259:0\n")
	write(nvme+"/size", "1000\n")
	write(nvme+"/numa_node", "1\n")
	write(nvme+"/removable", "1\n")
	write(nvme+"/queue/rotational", "0\n")
	write(nvme+"/nvme0n1p1/dev", "259:1\n")
	write(nvme+"/nvme0n1p1/size", "100\n")
	link("/sys/block/nvme0n1", "../devices/pci0000:00/0000:00:05.0/nvme/nvme0/nvme0n1")
	write("/run/udev/data/b259:0", "E:SCSI_IDENT_SERIAL=S1\nE:DM_WWN=dm-1\n")

	// DMI identity: a chassis type ghw names, an unreadable serial
	// (a directory where the file should be), a missing SKU.
	for name, v := range map[string]string{"product_name": "Standard PC (Q35 + ICH9, 2009)\n", "sys_vendor": "QEMU\n",
		"product_uuid": "4c4c4544-0000-1000-8000-000000000001\n", "product_family": "  padded  \n", "bios_vendor": "SeaBIOS\n",
		"bios_date": "04/01/2014\n", "board_vendor": "QEMU\n", "chassis_type": "23\n", "chassis_vendor": "QEMU\n"} {
		write("/sys/devices/virtual/dmi/id/"+name, v)
	}
	if err := os.MkdirAll(filepath.Join(root, "/sys/devices/virtual/dmi/id/product_serial"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("/sys/class/dmi/id", "../../devices/virtual/dmi/id")

	// NICs: one on the PCI bus, one on another bus, a virtual bridge,
	// a random MAC, one whose device link is missing, lo and the
	// bonding control file.
	//
	// nic is the device at dev with its MAC and, when assign is set, its
	// addr_assign_type; one under /sys/devices is linked from
	// /sys/class/net, as the kernel does.
	nic := func(dev, mac, assign string) {
		t.Helper()
		write(dev+"/address", mac+"\n")
		if assign != "" {
			write(dev+"/addr_assign_type", assign+"\n")
		}
		if rel, under := strings.CutPrefix(dev, "/sys/devices/"); under {
			link("/sys/class/net/"+path.Base(dev), "../../devices/"+rel)
		}
	}
	pci := "/sys/devices/pci0000:00/0000:00:03.0"
	nic(pci+"/virtio0/net/eth0", "52:54:00:12:34:56", "0")
	write(pci+"/virtio0/net/eth0/speed", "1000\n")
	write(pci+"/virtio0/net/eth0/duplex", "full\n")
	link(pci+"/virtio0/net/eth0/device", "../../../virtio0")
	link(pci+"/virtio0/subsystem", "../../../bus/virtio")
	nic(pci+"/net/eth1", "52:54:00:12:34:57", "0")
	link(pci+"/net/eth1/device", "../../../0000:00:03.0")
	link(pci+"/subsystem", "../../bus/pci")
	nic("/sys/devices/virtual/net/br0", "aa:bb:cc:dd:ee:ff", "3")
	nic("/sys/devices/virtual/net/lo", "00:00:00:00:00:00", "")
	write("/sys/class/net/bonding_masters", "bond0\n")
	nic("/sys/class/net/plain", "52:54:00:00:00:01", "0")

	write("/sys/block/sr0/dev", "11:0\n")
	write("/sys/block/sr0/size", "2097151\n")
	write("/sys/block/sr0/queue/rotational", "0\n")
	write("/sys/block/sdb/size", "100\n") // no rotational: an SSD to ghw
	write("/sys/block/loop0/size", "0\n")
	write("/sys/block/loop1/size", "8\n")
	write("/sys/block/zram0/size", "16\n")
	return root
}
