package protocol

import (
	"context"
	"encoding/json"
)

// SessionHandler is the server's logic behind one registration connection;
// the conversation itself (framing, acknowledgements, version gates) is
// Serve's job. Errors of type *ErrorReply reach the client as MsgError
// (when the negotiated version allows it); other errors close the
// connection.
type SessionHandler interface {
	// Update answers MsgUpdate: nil when the inventory for s.Identity
	// exists, else an *ErrorReply (message "MachineInventory not found",
	// reason InventoryNotFound).
	Update(ctx context.Context, s *ServerSession) error
	// Get answers MsgGet with everything the client sent in s: it creates
	// or updates the inventory and returns the config reply.
	Get(ctx context.Context, s *ServerSession) (*ConfigReply, error)
	// NetworkConfig answers an explicit MsgNetworkConfig (docs/protocol.md §7.3):
	// the network config once every claim holds an address, else an
	// *ErrorReply with reason WaitingForIPAddress, PoolExhausted or
	// AllocationFailed and RetryAfterSeconds.
	NetworkConfig(ctx context.Context, s *ServerSession) (*NetworkConfig, error)
}

// ServerSession is what one connection has told the server so far.
type ServerSession struct {
	Identity Identity
	// Version is the negotiated protocol version; 0 until MsgVersion.
	Version byte
	// LocalAddr and RemoteAddr of the TCP connection.
	RemoteAddr string
	Updated    bool // the client sent MsgUpdate

	SMBIOS map[string]any
	// SystemData is the MsgSystemDataV2 label map, or for legacy
	// MsgSystemData the raw ghw JSON in LegacySystemData.
	SystemData       map[string]any
	LegacySystemData json.RawMessage
	Annotations      map[string]string
	Labels           map[string]string
}

// ConfigReply is the server's answer to MsgGet.
type ConfigReply struct {
	Config Config
	// Network is appended to the MsgConfig YAML when it is real and the
	// negotiated version is at least 12 (docs/protocol.md §6.3).
	Network *NetworkConfig
	// ExplicitNetworkConfig announces that this server answers
	// MsgNetworkConfig on a second connection (docs/protocol.md §6.4).
	ExplicitNetworkConfig bool
}

// AnnounceKey is the top-level MsgConfig key of the announcement; upstream
// clients ignore unknown keys.
const AnnounceKey = "explicitNetworkConfig"
