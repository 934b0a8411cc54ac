package keyfile

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"hash"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/nodereg/nodereg/internal/host"
)

// NetworkManager's namespaces for the UUIDs it derives (libnm-glib-aux,
// nm-uuid): one for a keyfile without uuid=, one for a legacy UUID it
// normalises.
var (
	keyfileNS = [16]byte{0xb4, 0x25, 0xe9, 0xfb, 0x75, 0x98, 0x44, 0xb4, 0x9e, 0x3b, 0x5a, 0x2e, 0x3a, 0xaa, 0x49, 0x05}
	legacyNS  = [16]byte{0x4e, 0x72, 0xf7, 0x09, 0xca, 0x95, 0x44, 0x05, 0x90, 0x53, 0x1f, 0x43, 0x29, 0x4a, 0x61, 0x8c}
)

// seedDir is the keyfile plugin's profile directory, the one the UUID of
// a profile without uuid= is derived under whichever directory the file is
// in (/run and /usr/lib included): so the name alone decides it.
const seedDir = host.KeyfileDir

// DerivedUUID is the UUID NetworkManager gives a keyfile named name that
// has no uuid=, on a node whose profile directory is the default one.
func DerivedUUID(name string) string { return KeyfileUUID(seedDir, name) }

// KeyfileUUID is the UUID NetworkManager, with profileDir as its keyfile
// directory, gives a keyfile named name that has no uuid=: a name-based
// UUID, version 3 (MD5), over the strings "keyfile" and the profile path,
// each with its terminating NUL.
func KeyfileUUID(profileDir, name string) string {
	return nameUUID(md5.New(), 3, keyfileNS, "keyfile\x00"+path.Join(profileDir, name)+"\x00")
}

// NormalUUID is a uuid= value as NetworkManager holds it: a UUID in
// lower case; a legacy value (hex digits and dashes, 36 with four dashes
// or 40 with none) made a version 5 UUID of its lower-case text; anything
// else lower-cased as it is (the names rule refuses it in our keyfiles).
func NormalUUID(v string) string {
	v = strings.ToLower(v)
	if IsUUID(v) {
		return v
	}
	dashes, ok := 0, v != ""
	for _, c := range v {
		switch {
		case c == '-':
			dashes++
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f'):
			ok = false
		}
	}
	if ok && (dashes == 4 && len(v) == 36 || dashes == 0 && len(v) == 40) {
		return nameUUID(sha1.New(), 5, legacyNS, v)
	}
	return v
}

// IsUUID: v is a UUID in NetworkManager's text form (any case).
func IsUUID(v string) bool { return uuidRE().MatchString(v) }

// uuidRE is compiled on first use, as nm.go's.
var uuidRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

func nameUUID(h hash.Hash, version byte, ns [16]byte, s string) string {
	h.Write(ns[:])
	h.Write([]byte(s))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | version<<4
	u[8] = u[8]&0x3f | 0x80
	x := hex.EncodeToString(u)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
