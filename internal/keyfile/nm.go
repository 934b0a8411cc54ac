package keyfile

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Profile is what NetworkManager (1.42, the version the differential test
// holds this to) makes of the keys that say which profile a keyfile is,
// which device it binds and how it comes up. A value GLib's getter refuses
// is dropped, as NetworkManager drops it: Dropped lists it.
type Profile struct {
	// ID is connection.id, else the file name less .nmconnection.
	ID string
	// UUID is connection.uuid as NetworkManager normalises it
	// (NormalUUID), else the one it derives from the file name.
	UUID string
	// Type is connection.type with NetworkManager's keyfile alias
	// ("ethernet" for 802-3-ethernet); "" when absent.
	Type string
	// InterfaceName is connection.interface-name, else the deprecated
	// interface-name of the type's own group ([802-3-ethernet], [bond],
	// ...), which NetworkManager still reads when [connection] has none.
	InterfaceName string
	// MAC is the mac-address of [ethernet] (or [802-3-ethernet]) or
	// [infiniband], upper case, when it has the form NetworkManager
	// writes (see Unmodelled).
	MAC string
	// Match is each [match] key read as a list.
	Match map[string][]string
	// Autoconnect is connection.autoconnect (GLib's boolean), true when
	// absent or unreadable.
	Autoconnect bool
	// AutoconnectPriority is connection.autoconnect-priority as
	// NetworkManager parses it (strtoll, base 0, -999..999), 0 when
	// absent or refused.
	AutoconnectPriority int
	// Method4 and Method6 are ipv4.method and ipv6.method ("" when absent).
	Method4, Method6 string
	// Master and SlaveType are connection.master and slave-type.
	// NetworkManager 1.42 does not read controller= or port-type=.
	Master, SlaveType string
	// VLANParent is vlan.parent.
	VLANParent string
	// Addresses4 and Addresses6 are the addressN keys of [ipv4] and
	// [ipv6], "ip/prefix" each, in N's order.
	Addresses4, Addresses6 []string
	// Dropped names the keys ("[group] key") NetworkManager would drop
	// because GLib refuses their value.
	Dropped []string
	// Unmodelled names keys whose spelling NetworkManager reads in ways
	// this reading does not follow (address keys other than addressN=
	// ip/prefix[,gateway], a mac-address not written as six hex octets):
	// a caller that must know NetworkManager's reading refuses them.
	Unmodelled []string
}

// typeAliases are NetworkManager's keyfile aliases of setting names,
// which serve as group names and connection types alike.
var typeAliases = map[string]string{"802-3-ethernet": "ethernet", "802-11-wireless": "wifi", "802-11-wireless-security": "wifi-security"}

// SettingName is the setting NetworkManager names a type or group alias
// by ("ethernet" -> "802-3-ethernet").
func SettingName(alias string) string {
	for setting, a := range typeAliases {
		if a == alias {
			return setting
		}
	}
	return alias
}

// Alias is the keyfile alias of a setting name ("802-3-ethernet" ->
// "ethernet"), the name itself when it has none.
func Alias(setting string) string {
	if a, ok := typeAliases[setting]; ok {
		return a
	}
	return setting
}

// ReadProfile reads f, named fileName on disk, as NetworkManager does.
func ReadProfile(f *File, fileName string) Profile {
	p := Profile{Autoconnect: true, Match: map[string][]string{}}
	str := func(g, k string) string {
		v, err := f.String(g, k)
		if err != nil && err != ErrNotFound {
			p.Dropped = append(p.Dropped, fmt.Sprintf("[%s] %s", g, k))
		}
		return v
	}
	p.ID = str("connection", "id")
	if p.ID == "" {
		p.ID = strings.TrimSuffix(fileName, ".nmconnection")
	}
	p.UUID = NormalUUID(str("connection", "uuid"))
	if p.UUID == "" {
		p.UUID = DerivedUUID(fileName)
	}
	p.Type = Alias(str("connection", "type"))
	p.InterfaceName = str("connection", "interface-name")
	if _, ok := f.Value("connection", "interface-name"); !ok && p.Type != "" {
		p.InterfaceName = str(SettingName(p.Type), "interface-name")
	}
	if b, err := f.Boolean("connection", "autoconnect"); err == nil {
		p.Autoconnect = b
	}
	if v, ok := f.Value("connection", "autoconnect-priority"); ok {
		p.AutoconnectPriority, _ = nmInt(v, -999, 999)
	}
	p.Method4, p.Method6 = str("ipv4", "method"), str("ipv6", "method")
	p.Master, p.SlaveType = str("connection", "master"), str("connection", "slave-type")
	p.VLANParent = str("vlan", "parent")
	for _, k := range f.Keys("match") {
		if !slices.Contains(MatchKeys, k) {
			continue // a key NetworkManager ignores
		}
		if l, err := f.StringList("match", k); err == nil {
			p.Match[k] = l
		} else {
			p.Dropped = append(p.Dropped, "[match] "+k)
		}
	}
	p.readMAC(f, str)
	p.Addresses4 = p.readAddresses(f, "ipv4")
	p.Addresses6 = p.readAddresses(f, "ipv6")
	if p.Master != "" && slices.Contains(ipLessPorts, p.SlaveType) {
		// NetworkManager normalises a bond, bridge or team port to have
		// no IP configuration: its [ipv4] and [ipv6] are not read.
		p.Method4, p.Method6, p.Addresses4, p.Addresses6 = "", "", nil, nil
	}
	return p
}

// MatchKeys are the [match] properties of NetworkManager 1.42.
var MatchKeys = []string{"interface-name", "driver", "path", "kernel-command-line"}

// ipLessPorts are the port kinds NetworkManager strips of IP settings.
var ipLessPorts = []string{"bond", "bridge", "team"}

// macRE: six octets for ethernet, twenty for InfiniBand. This file's
// expressions are compiled on first use: the agent's start-up (every
// command) stays free of them.
var macRE = sync.OnceValue(func() map[bool]*regexp.Regexp {
	return map[bool]*regexp.Regexp{
		false: regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`),
		true:  regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){19}$`),
	}
})

func (p *Profile) readMAC(f *File, str func(g, k string) string) {
	for _, g := range f.Groups() {
		if g != "ethernet" && g != "802-3-ethernet" && g != "infiniband" {
			continue
		}
		raw, ok := f.Value(g, "mac-address")
		if !ok {
			continue
		}
		if v := str(g, "mac-address"); v == raw && macRE()[g == "infiniband"].MatchString(v) {
			p.MAC = strings.ToUpper(v)
		} else {
			p.MAC = ""
			p.Unmodelled = append(p.Unmodelled, fmt.Sprintf("[%s] mac-address", g))
		}
	}
}

// addressKey is the one spelling of an address key this reading follows
// (nmstatectl gc writes address0=, nmcli address1=); NetworkManager also
// reads address=, addresses=, addressesN= and merges them.
var addressKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^address(0|[1-9][0-9]{0,8})$`) })

// IsAddressKey: k is an addressN key of [ipv4] or [ipv6].
func IsAddressKey(k string) bool { return addressKey().MatchString(k) }

func (p *Profile) readAddresses(f *File, fam string) []string {
	type numbered struct {
		n    int
		addr string
	}
	var got []numbered
	seen := map[netip.Addr]bool{}
	for _, k := range f.Keys(fam) {
		if !strings.HasPrefix(k, "address") || k == "address-data" {
			continue
		}
		path := fmt.Sprintf("[%s] %s", fam, k)
		m := addressKey().FindStringSubmatch(k)
		raw, _ := f.Value(fam, k)
		pfx, ok := parseAddress(raw, fam == "ipv6")
		if m == nil || !ok || seen[pfx.Addr()] {
			p.Unmodelled = append(p.Unmodelled, path)
			continue
		}
		seen[pfx.Addr()] = true
		n, _ := strconv.Atoi(m[1])
		got = append(got, numbered{n, pfx.String()})
	}
	slices.SortFunc(got, func(a, b numbered) int { return a.n - b.n })
	var out []string
	for _, a := range got {
		out = append(out, a.addr)
	}
	return out
}

// parseAddress reads "ip/prefix" or "ip/prefix,gateway" of one family,
// with nothing around it and no escape.
func parseAddress(raw string, v6 bool) (netip.Prefix, bool) {
	a, gw, hasGW := strings.Cut(raw, ",")
	pfx, err := netip.ParsePrefix(a)
	if err != nil || pfx.Addr().Is6() != v6 || pfx.Addr().Is4In6() || pfx.Addr().Zone() != "" {
		return netip.Prefix{}, false
	}
	if hasGW {
		g, err := netip.ParseAddr(gw)
		if err != nil || g.Is6() != v6 || g.Is4In6() || g.Zone() != "" {
			return netip.Prefix{}, false
		}
	}
	return pfx, true
}

// nmInt is NetworkManager's integer reading of a raw keyfile value
// (_nm_utils_ascii_str_to_int64 with base 0): blanks around it dropped,
// an optional sign, then decimal, 0x hex or 0 octal digits and nothing
// else, within [lo, hi].
func nmInt(raw string, lo, hi int64) (int, bool) {
	s := strings.TrimFunc(raw, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || strings.Contains(s, "_") || strings.HasPrefix(strings.TrimLeft(s, "+-"), "0b") ||
		strings.HasPrefix(strings.TrimLeft(s, "+-"), "0o") || n < lo || n > hi {
		return 0, false
	}
	return int(n), true
}

var decimalRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(0|-?[1-9][0-9]{0,8})$`) })

// DecimalInt reads a value written as a plain decimal integer (an
// optional '-', no leading zero, nothing around it), the one spelling on
// which every reading of an integer agrees.
func DecimalInt(raw string) (int, bool) {
	if !decimalRE().MatchString(raw) {
		return 0, false
	}
	n, err := strconv.Atoi(raw)
	return n, err == nil
}
