package inventory

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jaypipes/ghw/pkg/memory"

	"github.com/nodereg/nodereg/internal/host"
)

// The Memory family is decoded here, from the run's snapshot, into ghw's
// types with ghw 0.27's rules (pkg/memory/memory_linux.go), so the label
// map and the legacy tree stay what they were; ghw opened /proc/meminfo
// once per field.

const (
	kib = 1024
	// maxMeminfo bounds /proc/meminfo (about 1.5 KiB on a real kernel).
	maxMeminfo = 64 << 10
	// maxSyslog bounds each syslog file scanned for the kernel's memory
	// line, the last resort where sysfs has no memory blocks.
	maxSyslog = 256 << 20
)

// syslogMemLine is the kernel's boot line "Memory: 24633272K/25155024K",
// compiled on first use: most machines never get this far.
var syslogMemLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Memory:\s+\d+K\/(\d+)K`) })

func collectMemory(files host.FS) (*memory.Info, error) {
	meminfo, meminfoErr := files.ReadFile(host.ProcMeminfo, maxMeminfo)
	field := func(key string) (int64, error) {
		if meminfoErr != nil {
			return -1, meminfoErr
		}
		return meminfoField(meminfo, key)
	}
	tub, err := field("MemTotal")
	if err != nil || tub < 1 {
		// ghw's own words, and the cause behind them when there is one: a
		// refused /proc/meminfo must say why, not only that memory is unknown.
		//lint:ignore ST1005 ghw's text, kept word for word
		noTotal := errors.New("Could not determine total usable bytes of memory")
		if meminfoErr != nil {
			return nil, fmt.Errorf("%w: %w", noTotal, meminfoErr)
		}
		return nil, noTotal
	}
	info := &memory.Info{}
	info.TotalUsableBytes = tub
	info.TotalPhysicalBytes = physicalMemory(files)
	if info.TotalPhysicalBytes < 1 {
		info.TotalPhysicalBytes = tub
	}
	sizes, err := hugePageSizes(files, host.SysHugepages)
	if errors.Is(err, errHugePageName) {
		return nil, err // ghw 0.27 panicked on such a name
	}
	info.SupportedPageSizes = sizes
	if hp, err := field("Hugepagesize"); err == nil {
		info.DefaultHugePageSize = uint64(hp)
	}
	info.TotalHugePageBytes, _ = field("Hugetlb")
	info.HugePageAmountsBySize = map[uint64]*memory.HugePageAmounts{}
	for _, s := range info.SupportedPageSizes {
		a, err := hugePageAmounts(files, host.SysHugepages, s)
		if err != nil {
			return nil, err
		}
		info.HugePageAmountsBySize[s] = a
	}
	return info, nil
}

// meminfoField is the first line whose key contains key (ghw's match), in
// bytes when the value is in kB.
func meminfoField(meminfo []byte, key string) (int64, error) {
	for line := range strings.SplitSeq(string(meminfo), "\n") {
		k, raw, _ := strings.Cut(line, ":")
		if !strings.Contains(k, key) {
			continue
		}
		inKB := strings.HasSuffix(raw, "kB")
		v, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(raw, "kB")))
		if err != nil {
			return -1, err
		}
		if inKB {
			v *= kib
		}
		return int64(v), nil
	}
	return -1, fmt.Errorf("failed to find '%s' entry in path %q", key, host.ProcMeminfo)
}

// physicalMemory is the online memory blocks' total, else the kernel's
// boot line in syslog, else -1.
func physicalMemory(files host.FS) int64 {
	if n := onlineBlocks(files); n >= 0 {
		return n
	}
	return syslogMemory(files)
}

func onlineBlocks(files host.FS) int64 {
	bs, err := strconv.ParseUint(host.ReadAttr(files, path.Join(host.SysMemory, "block_size_bytes")), 16, 64)
	if err != nil {
		return -1
	}
	entries, err := files.ReadDir(host.SysMemory)
	if err != nil {
		return -1
	}
	var total int64
	for _, e := range entries {
		if !memoryBlockName(e.Name()) {
			continue
		}
		s, err := files.ReadFile(path.Join(host.SysMemory, e.Name(), "state"), host.MaxAttr)
		if err != nil {
			return -1
		}
		if strings.TrimSpace(string(s)) == "online" {
			total += int64(bs)
		}
	}
	return total
}

// memoryBlockName is ghw's `memory\d+$`: a name ending in memory and digits.
func memoryBlockName(name string) bool {
	digits := strings.TrimRight(name, "0123456789")
	return len(digits) < len(name) && strings.HasSuffix(digits, "memory")
}

func syslogMemory(files host.FS) int64 {
	entries, err := files.ReadDir(host.VarLog)
	if err != nil {
		return -1
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "syslog") {
			continue
		}
		f, err := files.Open(path.Join(host.VarLog, e.Name()), maxSyslog)
		if err != nil {
			return -1
		}
		n, err := scanSyslog(f, path.Ext(e.Name()) == ".gz")
		f.Close()
		if err != nil {
			return -1
		}
		if n > 0 {
			return n
		}
	}
	return -1
}

func scanSyslog(f io.Reader, gz bool) (int64, error) {
	if gz {
		z, err := gzip.NewReader(f)
		if err != nil {
			return -1, err
		}
		defer z.Close()
		f = z
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := syslogMemLine().FindStringSubmatch(sc.Text())
		if len(m) != 2 {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n*kib > 0 {
			return int64(n * kib), nil
		}
	}
	return -1, nil
}

var errHugePageName = errors.New("unexpected huge page directory name")

// hugePageSizes lists dir's hugepages-<n>kB: the sizes read before a
// name that is no number (ghw kept those), an error for a name ghw
// could not take apart.
func hugePageSizes(files host.FS, dir string) ([]uint64, error) {
	out := make([]uint64, 0)
	entries, err := files.ReadDir(dir)
	if err != nil {
		return out, err
	}
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if len(parts) < 2 || len(parts[1]) < 2 {
			return out, fmt.Errorf("%w: %s", errHugePageName, path.Join(dir, e.Name()))
		}
		n, err := strconv.Atoi(parts[1][:len(parts[1])-2])
		if err != nil {
			return out, err
		}
		out = append(out, uint64(n*kib))
	}
	return out, nil
}

func hugePageAmounts(files host.FS, dir string, size uint64) (*memory.HugePageAmounts, error) {
	d := path.Join(dir, fmt.Sprintf("hugepages-%vkB", size/kib))
	entries, err := files.ReadDir(d)
	if err != nil {
		return nil, err
	}
	a := &memory.HugePageAmounts{}
	fields := map[string]*int64{"nr_hugepages": &a.Total, "free_hugepages": &a.Free, "surplus_hugepages": &a.Surplus, "resv_hugepages": &a.Reserved}
	for _, e := range entries {
		dst, ok := fields[e.Name()]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(host.ReadAttr(files, path.Join(d, e.Name())), 10, 64)
		if err != nil {
			return nil, err
		}
		*dst = n
	}
	return a, nil
}
