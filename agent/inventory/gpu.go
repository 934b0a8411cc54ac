package inventory

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jaypipes/ghw/pkg/gpu"
	"github.com/jaypipes/ghw/pkg/pci"
	"github.com/jaypipes/pcidb"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
)

// pciIDsPaths are where distributions put the PCI ID database, below the
// root; the same places pcidb searches, minus the network fetch.
var pciIDsPaths = host.PCIIDs

// rePCIAddress is compiled on first use (a machine with a DRM card).
var rePCIAddress = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[[:xdigit:]]{4}:[[:xdigit:]]{2}:[[:xdigit:]]{2}\.[[:xdigit:]]$`)
})

// collectGPU finds graphics cards the way ghw does (DRM card links that lead
// to a PCI device) but looks up only their vendor and product names instead
// of loading the whole PCI database, which costs more than the rest of the
// inventory together. Without a database the names are left out.
func collectGPU(files host.FS, log *logrus.Entry) (*gpu.Info, error) {
	const drm = host.SysDRM
	entries, err := files.ReadDir(drm)
	if errors.Is(err, fs.ErrNotExist) {
		// Virtual machines and containers without graphics have no DRM class.
		return &gpu.Info{GraphicsCards: []*gpu.GraphicsCard{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the DRM tree: %w", err)
	}
	info := &gpu.Info{GraphicsCards: []*gpu.GraphicsCard{}}
	type want struct{ vendor, product string }
	var wants []want
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "card") || strings.ContainsRune(name, '-') {
			continue // connectors such as card0-HDMI-A-1
		}
		idx, err := strconv.Atoi(name[len("card"):])
		if err != nil {
			idx = -1
		}
		dest, err := files.Readlink(path.Join(drm, name))
		if err != nil {
			continue
		}
		addr := ""
		parts := strings.Split(dest, "/")
		for i := len(parts) - 1; i >= 0; i-- {
			if rePCIAddress().MatchString(parts[i]) {
				addr = parts[i]
				break
			}
		}
		if addr == "" {
			continue
		}
		dev := path.Join(drm, name, "device")
		vendor := strings.TrimPrefix(host.ReadAttr(files, path.Join(dev, "vendor")), "0x")
		product := strings.TrimPrefix(host.ReadAttr(files, path.Join(dev, "device")), "0x")
		driver := ""
		if d, err := files.Readlink(path.Join(dev, "driver")); err == nil {
			driver = path.Base(d)
		}
		info.GraphicsCards = append(info.GraphicsCards, &gpu.GraphicsCard{
			Address: addr,
			Index:   idx,
			DeviceInfo: &pci.Device{
				Address:              addr,
				Vendor:               &pcidb.Vendor{ID: vendor},
				Product:              &pcidb.Product{VendorID: vendor, ID: product},
				Subsystem:            &pcidb.Product{},
				Class:                &pcidb.Class{},
				Subclass:             &pcidb.Subclass{},
				ProgrammingInterface: &pcidb.ProgrammingInterface{},
				Driver:               driver,
			},
		})
		wants = append(wants, want{vendor, product})
	}
	if len(wants) == 0 {
		return info, nil
	}
	vendors := map[string]bool{}
	for _, w := range wants {
		vendors[strings.ToLower(w.vendor)] = true
	}
	names, err := lookupPCINames(files, vendors)
	if err != nil {
		log.Infof("inventory: GPU vendor and product names left out: %v", err)
		return info, nil
	}
	for _, c := range info.GraphicsCards {
		d := c.DeviceInfo
		d.Vendor.Name = names(d.Vendor.ID, "")
		d.Product.Name = names(d.Vendor.ID, d.Product.ID)
	}
	return info, nil
}

// maxPCIIDs bounds the PCI ID database, compressed and not: some 1.5 MB
// today, and a file far larger is not one.
const maxPCIIDs = 64 << 20

// lookupPCINames reads the names of the given vendors and their devices from
// the first PCI ID database found under root and returns a lookup; product
// "" asks for the vendor name.
func lookupPCINames(files host.FS, vendors map[string]bool) (func(vendor, product string) string, error) {
	for _, p := range pciIDsPaths {
		f, err := files.Open(p, maxPCIIDs)
		if err != nil {
			continue
		}
		defer f.Close()
		var r io.Reader = f
		if strings.HasSuffix(p, ".gz") {
			gz, err := gzip.NewReader(f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", p, err)
			}
			r = &capped{r: gz, left: maxPCIIDs, what: p}
		}
		names := map[string]string{}
		sc := bufio.NewScanner(r)
		vendor := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" || line[0] == '#':
			case strings.HasPrefix(line, "C "):
				// Device classes follow the vendors; nothing more to read.
				return lookupFrom(names), nil
			case line[0] != '\t':
				vendor = ""
				if id, name, ok := strings.Cut(line, "  "); ok && vendors[strings.ToLower(id)] {
					vendor = strings.ToLower(id)
					names[vendor] = name
				}
			case vendor != "" && len(line) > 1 && line[1] != '\t':
				if id, name, ok := strings.Cut(line[1:], "  "); ok {
					names[vendor+":"+strings.ToLower(id)] = name
				}
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		return lookupFrom(names), nil
	}
	return nil, errors.New("no PCI ID database (pci.ids) under the root; install hwdata or pciutils to get them")
}

func lookupFrom(names map[string]string) func(vendor, product string) string {
	return func(vendor, product string) string {
		k := strings.ToLower(vendor)
		if product != "" {
			k += ":" + strings.ToLower(product)
		}
		return names[k]
	}
}

// capped fails a decompressed stream past its bound, so a small gzip file
// cannot unpack into an unbounded read.
type capped struct {
	r    io.Reader
	left int64
	what string
}

func (c *capped) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("%s: more than %d bytes uncompressed", c.what, maxPCIIDs)
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}
