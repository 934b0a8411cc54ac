package inventory

import (
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/jaypipes/ghw/pkg/block"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
)

// The Storage family is decoded here, from the run's snapshot, into ghw's
// own types, with ghw 0.27's rules field by field (pkg/block/block_linux.go),
// so that the label map and the legacy tree stay what they were. ghw
// read a disk's dev number and udev record once per property (five
// times a disk, four per partition) and /proc/self/mounts once per partition;
// here each is read once.

const (
	// sectorSize is the unit of sysfs' size attribute, whatever the disk's.
	sectorSize = 512
	// maxMounts bounds /proc/self/mounts: thousands of mounts in a busy
	// container host are far below it.
	maxMounts = 4 << 20
	// unknown is ghw's word for a value it could not read.
	unknown = "unknown"
)

func collectBlock(files host.FS, log *logrus.Entry) *block.Info {
	info := &block.Info{Disks: blockDisks(files, log)}
	for _, d := range info.Disks {
		info.TotalSizeBytes += d.SizeBytes
	}
	info.TotalPhysicalBytes = info.TotalSizeBytes
	return info
}

func blockDisks(files host.FS, log *logrus.Entry) []*block.Disk {
	entries, err := files.ReadDir(host.SysBlock)
	if err != nil {
		return nil
	}
	// Read only when a disk has a partition, as ghw did.
	mounts := sync.OnceValue(func() []mountEntry { return procMounts(files) })
	disks := make([]*block.Disk, 0)
	for _, e := range entries {
		name := e.Name()
		dir := path.Join(host.SysBlock, name)
		driveType, controller := diskTypes(name)
		// ghw 0.27: only an HDD is reclassified, a CD-ROM that some
		// kernels call non-rotational stays an ODD.
		if rot, ok := attrInt(files, path.Join(dir, "queue", "rotational")); (!ok || rot != 1) && driveType == block.DriveTypeHDD {
			driveType = block.DriveTypeSSD
		}
		size := attrUint(files, path.Join(dir, "size")) * sectorSize
		udev := udevRecord(files, dir)
		d := &block.Disk{
			Name:                   name,
			SizeBytes:              size,
			PhysicalBlockSizeBytes: attrUint(files, path.Join(dir, "queue", "physical_block_size")),
			LogicalBlockSizeBytes:  attrUint(files, path.Join(dir, "queue", "logical_block_size")),
			DriveType:              driveType,
			IsRemovable:            host.ReadAttr(files, path.Join(dir, "removable")) == "1",
			StorageController:      controller,
			BusPath:                udev.first("ID_PATH"),
			NUMANodeID:             diskNUMANode(files, name),
			Vendor:                 attrOr(files, path.Join(dir, "device", "vendor")),
			Model:                  udev.first("ID_MODEL"),
			SerialNumber:           udev.first("SCSI_IDENT_SERIAL", "ID_SCSI_SERIAL", "ID_SERIAL_SHORT", "ID_SERIAL"),
			WWN:                    udev.first("ID_WWN_WITH_EXTENSION", "ID_WWN", "DM_WWN"),
			WWNNoExtension:         udev.first("ID_WWN"),
		}
		if controller == block.StorageControllerLoop && size == 0 {
			continue // an unused loop device
		}
		d.Partitions = diskPartitions(files, name, mounts, log)
		for _, p := range d.Partitions {
			p.Disk = d
		}
		disks = append(disks, d)
	}
	return disks
}

// diskTypes is ghw's table from the kernel's device name.
func diskTypes(name string) (block.DriveType, block.StorageController) {
	for _, t := range []struct {
		prefix     string
		drive      block.DriveType
		controller block.StorageController
	}{
		{"fd", block.DriveTypeFDD, block.StorageControllerUnknown},
		{"sd", block.DriveTypeHDD, block.StorageControllerSCSI},
		{"hd", block.DriveTypeHDD, block.StorageControllerIDE},
		{"vd", block.DriveTypeHDD, block.StorageControllerVirtIO},
		{"nvme", block.DriveTypeSSD, block.StorageControllerNVMe},
		{"sr", block.DriveTypeODD, block.StorageControllerSCSI},
		{"xvd", block.DriveTypeHDD, block.StorageControllerSCSI},
		{"mmc", block.DriveTypeSSD, block.StorageControllerMMC},
		{"loop", block.DriveTypeVirtual, block.StorageControllerLoop},
	} {
		if strings.HasPrefix(name, t.prefix) {
			return t.drive, t.controller
		}
	}
	return block.DriveTypeUnknown, block.StorageControllerUnknown
}

// diskNUMANode keeps ghw 0.27's answer, quirk included: it looks for
// numa_node beside the block device rather than on its bus device, and
// answers 0 when that file cannot be read and -1 when it can (or when
// the disk is not a link into /sys/devices).
func diskNUMANode(files host.FS, name string) int {
	link, err := files.Readlink(path.Join(host.SysBlock, name))
	if err != nil || !strings.HasPrefix(link, "../devices/") {
		return -1
	}
	if _, err := files.ReadFile(path.Join(host.SysBlock, link, "numa_node"), host.MaxAttr); err != nil {
		return 0
	}
	return -1
}

func diskPartitions(files host.FS, disk string, mounts func() []mountEntry, log *logrus.Entry) []*block.Partition {
	out := make([]*block.Partition, 0)
	dir := path.Join(host.SysBlock, disk)
	entries, err := files.ReadDir(dir)
	if err != nil {
		log.WithField("source", "ghw").Debugf("failed to read disk partitions: %v", err)
		return out
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, disk) {
			continue
		}
		pdir := path.Join(dir, name)
		mp, fsType, ro := partitionMount(mounts(), name)
		udev := udevRecord(files, pdir)
		if fsType == "" {
			fsType = udev.first("ID_FS_TYPE")
		}
		out = append(out, &block.Partition{
			Name:            name,
			SizeBytes:       attrUint(files, path.Join(pdir, "size")) * sectorSize,
			MountPoint:      mp,
			Type:            fsType,
			IsReadOnly:      ro,
			UUID:            udev.first("ID_PART_ENTRY_UUID"),
			Label:           udev.first("ID_PART_ENTRY_NAME"),
			FilesystemLabel: udev.first("ID_FS_LABEL"),
		})
	}
	return out
}

// udevProps is a device's record in the udev database (its E: lines);
// nil when the device has none.
type udevProps map[string]string

// first is the value of the first key present, ghw's "unknown" when none
// is (or there is no record).
func (u udevProps) first(keys ...string) string {
	for _, k := range keys {
		if v, ok := u[k]; ok {
			return v
		}
	}
	return unknown
}

// udevRecord reads the udev record of the block device at sysfs dir.
func udevRecord(files host.FS, dir string) udevProps {
	dev, err := files.ReadFile(path.Join(dir, "dev"), host.MaxAttr)
	if err != nil {
		return nil
	}
	b, err := files.ReadFile(path.Join(host.RunUdevData, "b"+strings.TrimSpace(string(dev))), host.MaxAttr)
	if err != nil {
		return nil
	}
	props := udevProps{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if kv, ok := strings.CutPrefix(line, "E:"); ok {
			if k, v, ok := strings.Cut(kv, "="); ok {
				props[k] = v
			}
		}
	}
	return props
}

type mountEntry struct {
	device, mountPoint, fsType string
	readWrite                  bool
}

// procMounts is /proc/self/mounts' device lines; nil when it cannot be read.
func procMounts(files host.FS) []mountEntry {
	b, err := files.ReadFile(host.ProcMounts, maxMounts)
	if err != nil {
		return nil
	}
	unescape := strings.NewReplacer(`\011`, "\t", `\012`, "\n", `\040`, " ", `\\`, `\`)
	var out []mountEntry
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "/") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		m := mountEntry{device: f[0], mountPoint: unescape.Replace(f[1]), fsType: f[2]}
		for o := range strings.SplitSeq(f[3], ",") {
			if o == "rw" {
				m.readWrite = true
			}
		}
		out = append(out, m)
	}
	return out
}

// partitionMount is where /dev/<part> is mounted first, its type and
// whether read-only; an unmounted partition is ghw's "", "", true.
func partitionMount(mounts []mountEntry, part string) (string, string, bool) {
	for _, m := range mounts {
		if m.device == "/dev/"+part {
			return m.mountPoint, m.fsType, !m.readWrite
		}
	}
	return "", "", true
}

// attrUint is a sysfs number, 0 when it cannot be read.
func attrUint(files host.FS, p string) uint64 {
	n, err := strconv.ParseUint(host.ReadAttr(files, p), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// attrInt is a sysfs integer and whether it could be read.
func attrInt(files host.FS, p string) (int, bool) {
	b, err := files.ReadFile(p, host.MaxAttr)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// attrOr is a sysfs string, trimmed, or "unknown".
func attrOr(files host.FS, p string) string {
	b, err := files.ReadFile(p, host.MaxAttr)
	if err != nil {
		return unknown
	}
	return strings.TrimSpace(string(b))
}
