package protocol

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeFrame: any byte string either splits into a known type and a
// payload that re-encode to the same bytes, or is refused as ErrFrame.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{byte(MsgReady)})
	f.Add([]byte{byte(MsgVersion), Version})
	f.Add([]byte{0xff, 'x'})
	// testdata/fuzz holds the captured upstream payloads (tests/vectors).
	f.Fuzz(func(t *testing.T, b []byte) {
		mt, p, err := DecodeFrame(b)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			if len(b) > 0 && b[0] <= byte(MsgLast) {
				t.Fatalf("known type 0x%02x refused: %v", b[0], err)
			}
			return
		}
		if len(b) == 0 || mt > MsgLast {
			t.Fatalf("accepted %x as type %v", b, mt)
		}
		if !bytes.Equal(EncodeFrame(mt, p), b) {
			t.Fatalf("re-encoding %v/%x does not give back %x", mt, p, b)
		}
	})
}
