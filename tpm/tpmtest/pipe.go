package tpmtest

import (
	"bytes"
	"io"
)

// Pipe returns the two ends of an in-memory protocol.RawConn pair.
func Pipe() (client, server *End) {
	a, b := make(chan []byte, 1), make(chan []byte, 1)
	return &End{in: a, out: b}, &End{in: b, out: a}
}

// End is one side of Pipe; Close makes the peer's ReadRaw fail.
type End struct {
	in  <-chan []byte
	out chan<- []byte
}

func (e *End) WriteRaw(p []byte) error {
	e.out <- bytes.Clone(p)
	return nil
}

func (e *End) ReadRaw() ([]byte, error) {
	p, ok := <-e.in
	if !ok {
		return nil, io.EOF
	}
	return p, nil
}

// Close ends this side's writes.
func (e *End) Close() { close(e.out) }
