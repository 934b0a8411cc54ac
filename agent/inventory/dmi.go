package inventory

import (
	"io/fs"
	"path"
	"slices"

	"github.com/jaypipes/ghw/pkg/baseboard"
	"github.com/jaypipes/ghw/pkg/bios"
	"github.com/jaypipes/ghw/pkg/chassis"
	"github.com/jaypipes/ghw/pkg/product"

	"github.com/nodereg/nodereg/internal/host"
)

// The four identity families (Product, BIOS, BaseBoard, Chassis) are
// read from the run's snapshot of /sys/class/dmi/id, the files the
// SMBIOS family reads too, with ghw 0.27's rules (pkg/linuxdmi: a value
// trimmed, "unknown" when it cannot be read). ghw built its whole path
// table for every value it read. Without a DMI directory ghw's own
// modules run, for their device-tree fallback.

// dmiDir says whether the kernel exports DMI identity (ghw's
// linuxdmi.Available).
func dmiDir(files host.FS) bool {
	fi, err := files.Stat(host.DMIIDDir)
	return err == nil && fi.IsDir()
}

func dmiItem(files host.FS, name string) string {
	if !dmiListed(files, name) {
		return unknown
	}
	return attrOr(files, path.Join(host.DMIIDDir, name))
}

// dmiListed says whether name may be read in the DMI directory: listed
// in it, or the directory cannot be listed (then the read says). A name
// the listing lacks would be a read failing with ENOENT, the "unknown"
// or left-out field it gives anyway; the listing is the snapshot's one,
// so a VM or a scratch root without most DMI files is not asked for each
// one (below a --root, each such read resolved every directory of its
// path on the way).
func dmiListed(files host.FS, name string) bool {
	entries, err := files.ReadDir(host.DMIIDDir)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == name })
}

// fromDMI is a family's identity filled from the DMI directory, or
// ghw's own module (its device-tree fallback) where there is none.
func fromDMI[T any](files host.FS, ghwNew func(...any) (*T, error), ghwOpts []any, fill func(item func(name string) string) *T) (*T, error) {
	if !dmiDir(files) {
		return ghwNew(ghwOpts...)
	}
	return fill(func(name string) string { return dmiItem(files, name) }), nil
}

func collectProduct(files host.FS, ghwOpts []any) (*product.Info, error) {
	return fromDMI(files, product.New, ghwOpts, func(item func(string) string) *product.Info {
		return &product.Info{
			Family:       item("product_family"),
			Name:         item("product_name"),
			Vendor:       item("sys_vendor"),
			SerialNumber: item("product_serial"),
			UUID:         item("product_uuid"),
			SKU:          item("product_sku"),
			Version:      item("product_version"),
		}
	})
}

func collectBIOS(files host.FS, ghwOpts []any) (*bios.Info, error) {
	return fromDMI(files, bios.New, ghwOpts, func(item func(string) string) *bios.Info {
		return &bios.Info{Vendor: item("bios_vendor"), Version: item("bios_version"), Date: item("bios_date")}
	})
}

func collectBaseboard(files host.FS, ghwOpts []any) (*baseboard.Info, error) {
	return fromDMI(files, baseboard.New, ghwOpts, func(item func(string) string) *baseboard.Info {
		return &baseboard.Info{
			AssetTag:     item("board_asset_tag"),
			SerialNumber: item("board_serial"),
			Vendor:       item("board_vendor"),
			Version:      item("board_version"),
			Product:      item("board_name"),
		}
	})
}

func collectChassis(files host.FS, ghwOpts []any) (*chassis.Info, error) {
	return fromDMI(files, chassis.New, ghwOpts, func(item func(string) string) *chassis.Info {
		i := &chassis.Info{
			AssetTag:        item("chassis_asset_tag"),
			SerialNumber:    item("chassis_serial"),
			Type:            item("chassis_type"),
			Vendor:          item("chassis_vendor"),
			Version:         item("chassis_version"),
			TypeDescription: unknown,
		}
		if d, ok := chassisTypeDescriptions[i.Type]; ok {
			i.TypeDescription = d
		}
		return i
	})
}

// chassisTypeDescriptions is ghw 0.27's table (pkg/chassis), keyed by
// the kernel's decimal chassis_type; ghw does not export it.
var chassisTypeDescriptions = map[string]string{
	"1": "Other", "2": "Unknown", "3": "Desktop", "4": "Low profile desktop", "5": "Pizza box",
	"6": "Mini tower", "7": "Tower", "8": "Portable", "9": "Laptop", "10": "Notebook",
	"11": "Hand held", "12": "Docking station", "13": "All in one", "14": "Sub notebook",
	"15": "Space-saving", "16": "Lunch box", "17": "Main server chassis", "18": "Expansion chassis",
	"19": "SubChassis", "20": "Bus Expansion chassis", "21": "Peripheral chassis", "22": "RAID chassis",
	"23": "Rack mount chassis", "24": "Sealed-case PC", "25": "Multi-system chassis", "26": "Compact PCI",
	"27": "Advanced TCA", "28": "Blade", "29": "Blade enclosure", "30": "Tablet", "31": "Convertible",
	"32": "Detachable", "33": "IoT gateway", "34": "Embedded PC", "35": "Mini PC", "36": "Stick PC",
}
