package protocol

import (
	"errors"
	"fmt"

	"github.com/gorilla/websocket"
)

// DefaultMaxFrame bounds one message on both sides. Upstream sets no limit
// (docs/protocol.md §1.4); the largest real payloads (system data of a big machine)
// are a few hundred KiB, so 4 MiB leaves room without letting a peer make us
// buffer without end.
const DefaultMaxFrame = 4 << 20

// DefaultMaxConversation bounds the bytes read over one whole connection.
const DefaultMaxConversation = 16 << 20

// ErrFrame marks a message that breaks the framing rules of docs/protocol.md §2.1.
var ErrFrame = errors.New("malformed message")

// DecodeFrame splits one typed message into its type and payload, with the
// checks upstream's reader makes: non-empty, type known to this side.
func DecodeFrame(b []byte) (MsgType, []byte, error) {
	if len(b) == 0 {
		return MsgUndefined, nil, fmt.Errorf("%w: empty message", ErrFrame)
	}
	t := MsgType(b[0])
	if t > MsgLast {
		return t, nil, fmt.Errorf("%w: unknown message type 0x%02x", ErrFrame, b[0])
	}
	return t, b[1:], nil
}

// EncodeFrame prepends the type byte.
func EncodeFrame(t MsgType, payload []byte) []byte {
	b := make([]byte, 0, 1+len(payload))
	b = append(b, byte(t))
	return append(b, payload...)
}

// Conn is a websocket carrying protocol messages: binary frames only, a
// bound on each message and on the whole conversation.
type Conn struct {
	ws       *websocket.Conn
	read     int64
	maxTotal int64
}

// NewConn wraps ws; maxFrame <= 0 means DefaultMaxFrame.
func NewConn(ws *websocket.Conn, maxFrame int64) *Conn {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	ws.SetReadLimit(maxFrame)
	return &Conn{ws: ws, maxTotal: DefaultMaxConversation}
}

// WS returns the underlying websocket.
func (c *Conn) WS() *websocket.Conn { return c.ws }

// Write sends one typed message.
func (c *Conn) Write(t MsgType, payload []byte) error {
	return c.ws.WriteMessage(websocket.BinaryMessage, EncodeFrame(t, payload))
}

// WriteRaw sends a message without type byte (TPM challenge and response,
// config reply to clients below version 7).
func (c *Conn) WriteRaw(payload []byte) error {
	return c.ws.WriteMessage(websocket.BinaryMessage, payload)
}

// ReadRaw reads one whole binary message.
func (c *Conn) ReadRaw() ([]byte, error) {
	mt, b, err := c.ws.ReadMessage()
	if err != nil {
		if errors.Is(err, websocket.ErrReadLimit) {
			return nil, fmt.Errorf("%w: message larger than the limit", ErrFrame)
		}
		return nil, err
	}
	c.read += int64(len(b))
	if c.read > c.maxTotal {
		return nil, fmt.Errorf("%w: conversation exceeds %d bytes", ErrFrame, c.maxTotal)
	}
	if mt != websocket.BinaryMessage {
		return nil, fmt.Errorf("%w: got non binary message", ErrFrame)
	}
	return b, nil
}

// Read reads one typed message.
func (c *Conn) Read() (MsgType, []byte, error) {
	b, err := c.ReadRaw()
	if err != nil {
		return MsgUndefined, nil, err
	}
	return DecodeFrame(b)
}

// Expect reads one message and requires type want. A MsgError instead is
// returned as *ErrorReply.
func (c *Conn) Expect(want MsgType) ([]byte, error) {
	t, p, err := c.Read()
	if err != nil {
		return nil, err
	}
	if t == want {
		return p, nil
	}
	if t == MsgError {
		return nil, DecodeError(p)
	}
	return nil, fmt.Errorf("%w: expecting '%s' but got '%s'", ErrFrame, want, t)
}
