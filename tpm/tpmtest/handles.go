package tpmtest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
)

// PersistentHandles lists the handles in this swtpm's persistent range,
// over a connection of its own (so it needs no package under test): a
// test compares them before and after a run that must not change the TPM.
func (s *Swtpm) PersistentHandles(t testing.TB) []uint32 {
	t.Helper()
	conn, err := net.DialTimeout("unix", s.Socket, 10*time.Second)
	if err != nil {
		t.Fatalf("listing persistent handles: %v", err)
	}
	defer conn.Close()
	rsp, err := (tpm2.GetCapability{
		Capability:    tpm2.TPMCapHandles,
		Property:      uint32(tpm2.TPMHTPersistent) << 24,
		PropertyCount: 64,
	}).Execute(streamTPM{conn})
	if err != nil {
		t.Fatalf("listing persistent handles: %v", err)
	}
	hs, err := rsp.CapabilityData.Data.Handles()
	if err != nil {
		t.Fatalf("listing persistent handles: %v", err)
	}
	out := []uint32{}
	for _, h := range hs.Handle {
		out = append(out, uint32(h))
	}
	return out
}

// streamTPM sends one command on swtpm's data socket and reads the whole
// response, whose size is in its 10-byte header.
type streamTPM struct{ conn net.Conn }

func (s streamTPM) Send(cmd []byte) ([]byte, error) {
	if err := s.conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := s.conn.Write(cmd); err != nil {
		return nil, err
	}
	hdr := make([]byte, 10)
	if _, err := io.ReadFull(s.conn, hdr); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(hdr[2:6])
	if size < 10 || size > 1<<16 {
		return nil, fmt.Errorf("response size %d", size)
	}
	rsp := make([]byte, size)
	copy(rsp, hdr)
	if _, err := io.ReadFull(s.conn, rsp[10:]); err != nil {
		return nil, err
	}
	return rsp, nil
}
