package handover

import (
	"fmt"
	"math/big"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/protocol"
)

// InstallDevice picks the install target as upstream does (docs/protocol.md §8.5):
// install.device when set, else a disk matching every device-selector rule.
// Upstream's pick among several matches is Go map order; ours is the first
// by name, so the same machine always installs to the same disk.
func InstallDevice(files host.FS, in protocol.Install) (string, error) {
	if in.Device != "" {
		return in.Device, nil
	}
	const blockDir = host.SysBlock
	ents, err := files.ReadDir(blockDir)
	if err != nil {
		return "", fmt.Errorf("install: no install.device and the disks cannot be listed: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "loop") || strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "zram") || strings.HasPrefix(n, "sr") || strings.HasPrefix(n, "dm-") {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		size := diskSize(files, path.Join(blockDir, n, "size"))
		ok, err := matchesAll(n, size, in.DeviceSelector)
		if err != nil {
			return "", err
		}
		if ok {
			return "/dev/" + n, nil
		}
	}
	return "", fmt.Errorf("install: no disk among %v matches install.device-selector", names)
}

// maxSysfsValue bounds one sysfs attribute read (a page at most).
const maxSysfsValue = 64 << 10

func diskSize(files host.FS, p string) *big.Int {
	b, err := files.ReadFile(p, maxSysfsValue)
	if err != nil {
		return nil
	}
	sectors, ok := new(big.Int).SetString(strings.TrimSpace(string(b)), 10)
	if !ok {
		return nil
	}
	return sectors.Mul(sectors, big.NewInt(512))
}

func matchesAll(name string, size *big.Int, rules []protocol.DeviceSelector) (bool, error) {
	for i, r := range rules {
		switch r.Key {
		case "Name":
			in := false
			for _, v := range r.Values {
				if v == name || v == "/dev/"+name {
					in = true
				}
			}
			switch r.Operator {
			case "In":
				if !in {
					return false, nil
				}
			case "NotIn":
				if in {
					return false, nil
				}
			default:
				return false, fmt.Errorf("install.device-selector[%d]: operator %q does not apply to Name", i, r.Operator)
			}
		case "Size":
			if len(r.Values) == 0 {
				return false, fmt.Errorf("install.device-selector[%d]: Size needs a value", i)
			}
			q, err := parseQuantity(r.Values[0])
			if err != nil {
				return false, fmt.Errorf("install.device-selector[%d]: %w", i, err)
			}
			if size == nil {
				return false, nil
			}
			c := size.Cmp(q)
			switch r.Operator {
			case "Gt":
				if c <= 0 {
					return false, nil
				}
			case "Lt":
				if c >= 0 {
					return false, nil
				}
			default:
				return false, fmt.Errorf("install.device-selector[%d]: operator %q does not apply to Size", i, r.Operator)
			}
		default:
			return false, fmt.Errorf("install.device-selector[%d]: unknown key %q (Name or Size)", i, r.Key)
		}
	}
	return true, nil
}

// quantityRE is compiled on first use: only a reset plan parses sizes,
// and package start-up stays free for every other command.
var quantityRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$`) })

// parseQuantity reads the integer Kubernetes quantities device selectors
// use (e.g. 100Gi, 500G, 1073741824).
func parseQuantity(s string) (*big.Int, error) {
	m := quantityRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return nil, fmt.Errorf("size %q is not a quantity such as 100Gi", s)
	}
	n, _ := new(big.Int).SetString(m[1], 10)
	mult := map[string]int64{"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
	if v, ok := mult[m[2]]; ok {
		return n.Mul(n, big.NewInt(v)), nil
	}
	exp := map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}[m[2]]
	return n.Lsh(n, exp), nil
}
