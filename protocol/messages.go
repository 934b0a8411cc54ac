package protocol

import "fmt"

// MsgType is the first byte of every typed protocol message.
type MsgType byte

// Message types, byte for byte as elemental-operator defines them
// (docs/protocol.md §2.2).
const (
	MsgUndefined     MsgType = 0x00
	MsgReady         MsgType = 0x01
	MsgSmbios        MsgType = 0x02
	MsgLabels        MsgType = 0x03
	MsgGet           MsgType = 0x04
	MsgVersion       MsgType = 0x05
	MsgSystemData    MsgType = 0x06
	MsgConfig        MsgType = 0x07
	MsgError         MsgType = 0x08
	MsgAnnotations   MsgType = 0x09
	MsgUpdate        MsgType = 0x0A
	MsgSystemDataV2  MsgType = 0x0B
	MsgNetworkConfig MsgType = 0x0C

	// MsgLast is the highest type this implementation knows; its byte value
	// is the protocol version we speak (12, as elemental-operator v1.7+).
	MsgLast = MsgNetworkConfig
)

// Version is the protocol version this package speaks.
const Version = byte(MsgLast)

// Negotiated-version thresholds that gate behaviour (docs/protocol.md §2.5).
const (
	minServerAcceptedVersion = 5  // servers reject clients at or below MsgGet (4)
	versionUpdate            = 10 // MsgUpdate
	versionSystemDataV2      = 11
	versionSystemDataLegacy  = 6
	versionAnnotations       = 9
	versionTypedConfig       = 7
	versionError             = 8
	versionNetworkConfig     = 12
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
