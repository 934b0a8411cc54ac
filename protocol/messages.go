package protocol

import "fmt"

// MsgType is the first byte of every typed protocol message.
type MsgType byte

// Message types, byte for byte as elemental-operator defines them
// (docs/protocol.md §2.2): in upstream's order, from 0x00.
const (
	MsgUndefined     MsgType = iota // 0x00
	MsgReady                        // 0x01
	MsgSmbios                       // 0x02
	MsgLabels                       // 0x03
	MsgGet                          // 0x04
	MsgVersion                      // 0x05
	MsgSystemData                   // 0x06
	MsgConfig                       // 0x07
	MsgError                        // 0x08
	MsgAnnotations                  // 0x09
	MsgUpdate                       // 0x0A
	MsgSystemDataV2                 // 0x0B
	MsgNetworkConfig                // 0x0C

	// MsgLast is the highest type this implementation knows; its byte value
	// is the protocol version we speak (12, as elemental-operator v1.7+).
	MsgLast = MsgNetworkConfig
)

// Version is the protocol version this package speaks.
const Version = byte(MsgLast)

// Negotiated-version thresholds that gate behaviour (docs/protocol.md §2.5):
// a message is spoken from the version that is its own byte on (and servers
// refuse clients at MsgGet's, 4, or below).
const (
	versionSystemDataLegacy = byte(MsgSystemData)
	versionTypedConfig      = byte(MsgConfig)
	versionError            = byte(MsgError)
	versionAnnotations      = byte(MsgAnnotations)
	versionUpdate           = byte(MsgUpdate)
	versionSystemDataV2     = byte(MsgSystemDataV2)
	versionNetworkConfig    = byte(MsgNetworkConfig)
)

// SendsLegacySystemData reports whether a conversation at negotiated
// version v sends MsgSystemData (ghw's JSON, servers v1.1.1–v1.6.2) rather
// than MsgSystemDataV2, so a client encodes the legacy form only for them.
func SendsLegacySystemData(v byte) bool {
	return v >= versionSystemDataLegacy && v < versionSystemDataV2
}

var msgNames = [...]string{
	"Undefined", "Ready", "Smbios", "Labels", "Get", "Version", "SystemData",
	"Config", "Error", "Annotations", "Update", "SystemDataV2", "NetworkConfig",
}

func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return fmt.Sprintf("Unknown(0x%02x)", byte(t))
}
