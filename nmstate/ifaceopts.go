package nmstate

import (
	"strconv"
	"strings"
)

// ifaceOpts are the interface-level keys beyond name/type/state
// (docs/nmstate.md, "Interface options").
type ifaceOpts struct {
	profileName  string // "" = the interface name
	byMAC        bool   // identifier: mac-address
	waitIP       string
	lldp         *bool
	acceptAllMAC *bool
	autoNeg      *bool
	speed        *uint64
	duplex       string
	totalVFs     *uint64
	ethtool      map[string]string // [ethtool] key -> value
	mptcpFlags   *uint64
}

// mptcpBits are NetworkManager's connection.mptcp-flags for nmstate's
// address-flags (nm/settings/mptcp.rs); 0x08 (also-without-default-route)
// is always added, an empty list is 0x01 (disabled).
var mptcpBits = map[string]uint64{"signal": 0x10, "subflow": 0x20, "backup": 0x40, "fullmesh": 0x80}

var ifaceOptKeys = []string{"profile-name", "identifier", "wait-ip", "lldp", "accept-all-mac-addresses", "ethernet", "ethtool", "mptcp"}

const maxProfileName = 64

func parseIfaceOpt(ifc *iface, f field) error {
	o := &ifc.opts
	var err error
	switch f.key {
	case "profile-name":
		if o.profileName, err = str(f.path, f.val, maxProfileName, true); err == nil {
			err = checkProfileName(f.path, o.profileName)
		}
	case "identifier":
		var s string
		if s, err = str(f.path, f.val, maxTextLen, true); err != nil {
			return err
		}
		switch s {
		case "name":
		case "mac-address":
			o.byMAC = true
		default:
			return invalid(f.path, "unknown variant `%s`, expected `name` or `mac-address`", s)
		}
	case "wait-ip":
		o.waitIP, err = parseWaitIP(f.path, f.val)
	case "lldp":
		fs, err := mapping(f.path, f.val, []string{"enabled"}, []string{"neighbors"})
		if err != nil {
			return err
		}
		for _, e := range fs {
			b, err := boolean(e.path, e.val)
			if err != nil {
				return err
			}
			o.lldp = &b
		}
	case "accept-all-mac-addresses":
		var b bool
		if b, err = boolean(f.path, f.val); err == nil {
			o.acceptAllMAC = &b
		}
	case "ethernet":
		err = parseEthernet(ifc, f)
	case "ethtool":
		err = parseEthtool(ifc, f)
	case "mptcp":
		err = parseMptcp(ifc, f)
	}
	return err
}

func parseEthernet(ifc *iface, f field) error {
	o := &ifc.opts
	fs, err := mapping(f.path, f.val, []string{"auto-negotiation", "speed", "duplex", "sr-iov"}, nil)
	if err != nil {
		return err
	}
	for _, e := range fs {
		switch e.key {
		case "auto-negotiation":
			b, err := boolean(e.path, e.val)
			if err != nil {
				return err
			}
			o.autoNeg = &b
		case "speed":
			v, err := unsigned(e.path, e.val, maxU32)
			if err != nil {
				return err
			}
			o.speed = &v
		case "duplex":
			s, err := str(e.path, e.val, maxTextLen, true)
			if err != nil {
				return err
			}
			if s != "full" && s != "half" {
				return invalid(e.path, "unknown variant `%s`, expected `full` or `half`", s)
			}
			o.duplex = s
		case "sr-iov":
			sr, err := mapping(e.path, e.val, []string{"total-vfs"}, []string{"vfs", "drivers-autoprobe"})
			if err != nil {
				return err
			}
			for _, s := range sr {
				v, err := unsigned(s.path, s.val, maxU32)
				if err != nil {
					return err
				}
				o.totalVFs = &v
			}
		}
	}
	return nil
}

// parseEthtool reads the pause and ring settings; features and coalesce
// stay with nmstatectl (docs/nmstate.md, "Outside the subset").
func parseEthtool(ifc *iface, f field) error {
	fs, err := mapping(f.path, f.val, []string{"pause", "ring"}, []string{"feature", "coalesce", "fec", "msglvl", "channels", "eee"})
	if err != nil {
		return err
	}
	out := map[string]string{}
	for _, e := range fs {
		keys := []string{"autoneg", "rx", "tx"}
		if e.key == "ring" {
			keys = []string{"rx", "tx", "rx-jumbo", "rx-mini"}
		}
		sub, err := mapping(e.path, e.val, keys, []string{"rx-buf-len", "tx-push", "tx-push-buf-len", "tcp-data-split", "cqe-size"})
		if err != nil {
			return err
		}
		for _, s := range sub {
			if e.key == "pause" {
				b, err := boolean(s.path, s.val)
				if err != nil {
					return err
				}
				out["pause-"+s.key] = strconv.FormatBool(b)
				continue
			}
			v, err := unsigned(s.path, s.val, maxU32)
			if err != nil {
				return err
			}
			out["ring-"+s.key] = uitoa(v)
		}
	}
	ifc.opts.ethtool = out
	return nil
}

// checkProfileName keeps a profile name usable as a file name and a keyfile
// value.
func checkProfileName(path, s string) error {
	if s == "" || strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/") {
		return unsupported(path, "profile-name %q cannot be a keyfile name (empty, leading dot or '/')", s)
	}
	return checkText(path, s)
}

// id is the profile's connection.id and file name stem.
func (ifc *iface) id() string {
	if ifc.opts.profileName != "" {
		return ifc.opts.profileName
	}
	return ifc.name
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// writeIfaceOpts adds the interface-level keys to the [connection] and
// [ethernet] sections and returns the extra sections.
func (ifc *iface) writeIfaceOpts(conn *section) []*section {
	o := ifc.opts
	if o.lldp != nil {
		conn.set("lldp", boolDigit(*o.lldp))
	}
	if o.mptcpFlags != nil {
		conn.set("mptcp-flags", uitoa(*o.mptcpFlags))
	}
	var secs []*section
	mac, mtu := ifc.mac, ifc.mtu
	if ifc.ib != nil {
		// An IPoIB child's MTU is [infiniband] mtu (kinds.go), and gc
		// writes no MAC for it (testdata/gcmade 201, 214).
		mac, mtu = "", nil
	}
	if mac != "" || mtu != nil || o.acceptAllMAC != nil || o.autoNeg != nil || o.speed != nil || o.duplex != "" {
		e := newSection("ethernet")
		if o.byMAC {
			e.set("mac-address", strings.ToUpper(mac))
		} else {
			e.set("cloned-mac-address", strings.ToUpper(mac))
		}
		if mtu != nil {
			e.set("mtu", uitoa(*mtu))
		}
		if o.acceptAllMAC != nil {
			e.set("accept-all-mac-addresses", boolDigit(*o.acceptAllMAC))
		}
		if o.autoNeg != nil {
			e.set("auto-negotiate", strconv.FormatBool(*o.autoNeg))
		}
		if o.speed != nil {
			e.set("speed", uitoa(*o.speed))
		}
		e.set("duplex", o.duplex)
		secs = append(secs, e)
	}
	if o.totalVFs != nil {
		s := newSection("sriov")
		s.set("total-vfs", uitoa(*o.totalVFs))
		secs = append(secs, s)
	}
	if len(o.ethtool) > 0 {
		s := newSection("ethtool")
		for k, v := range o.ethtool {
			s.set(k, v)
		}
		secs = append(secs, s)
	}
	return secs
}

// parseMptcp reads mptcp.address-flags. gc refuses flags on a host whose
// net.mptcp.enabled is 0; this translator writes what gc writes on a host
// with MPTCP on (docs/nmstate.md).
func parseMptcp(ifc *iface, f field) error {
	fs, err := mapping(f.path, f.val, []string{"address-flags"}, nil)
	if err != nil {
		return err
	}
	for _, e := range fs {
		items, err := sequence(e.path, e.val, len(mptcpBits))
		if err != nil {
			return err
		}
		var v uint64 = 0x01
		if len(items) > 0 {
			v = 0x08
		}
		for i, it := range items {
			s, err := str(index(e.path, i), it, maxTextLen, true)
			if err != nil {
				return err
			}
			bit, ok := mptcpBits[s]
			if !ok {
				return invalid(index(e.path, i), "unknown variant `%s`, expected one of `signal`, `subflow`, `backup`, `fullmesh`", s)
			}
			v |= bit
		}
		ifc.opts.mptcpFlags = &v
	}
	return nil
}
