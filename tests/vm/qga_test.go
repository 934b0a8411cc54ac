//go:build vmlab

package vm

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// qga talks to qemu-guest-agent over its virtio-serial socket: one
// connection per command, re-synchronised with guest-sync-delimited, since a
// guest that rebooted leaves stale bytes in the channel.
type qga struct {
	sock string
	seq  int
}

// execResult is what guest-exec-status reported for one command.
type execResult struct {
	Code   int
	Stdout string
	Stderr string
}

func (r execResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
}

type qgaConn struct {
	c net.Conn
	r *bufio.Reader
}

func (q *qga) dial(timeout time.Duration) (*qgaConn, error) {
	c, err := net.DialTimeout("unix", q.sock, timeout)
	if err != nil {
		return nil, err
	}
	qc := &qgaConn{c: c, r: bufio.NewReader(c)}
	q.seq++
	id := 4000 + q.seq
	if err := qc.send("guest-sync-delimited", map[string]any{"id": id}); err != nil {
		c.Close()
		return nil, err
	}
	// The reply is preceded by 0xFF; anything before it is stale.
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	for {
		b, err := qc.r.ReadByte()
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("guest agent: no answer to guest-sync-delimited: %w", err)
		}
		if b == 0xFF {
			break
		}
	}
	var got int
	if err := qc.recv(&got, timeout); err != nil || got != id {
		c.Close()
		return nil, fmt.Errorf("guest agent: guest-sync-delimited: got %d want %d (%v)", got, id, err)
	}
	return qc, nil
}

func (qc *qgaConn) send(cmd string, args any) error {
	m := map[string]any{"execute": cmd}
	if args != nil {
		m["arguments"] = args
	}
	b, _ := json.Marshal(m)
	_ = qc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := qc.c.Write(append(b, '\n'))
	return err
}

func (qc *qgaConn) recv(v any, timeout time.Duration) error {
	_ = qc.c.SetReadDeadline(time.Now().Add(timeout))
	for {
		line, err := qc.r.ReadBytes('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimLeft(line, "\xff")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var env struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &env); err != nil {
			return fmt.Errorf("guest agent: bad reply %q: %w", line, err)
		}
		if env.Error != nil {
			return fmt.Errorf("guest agent: %s", env.Error.Desc)
		}
		return json.Unmarshal(env.Return, v)
	}
}

// ping answers whether the guest agent is up.
func (q *qga) ping() error {
	qc, err := q.dial(3 * time.Second)
	if err != nil {
		return err
	}
	qc.c.Close()
	return nil
}

// run runs sh -c cmd in the guest and waits up to timeout for it to end.
func (q *qga) run(cmd string, timeout time.Duration) (execResult, error) {
	qc, err := q.dial(10 * time.Second)
	if err != nil {
		return execResult{}, err
	}
	defer qc.c.Close()
	if err := qc.send("guest-exec", map[string]any{"path": "/bin/sh", "arg": []string{"-c", cmd}, "capture-output": true}); err != nil {
		return execResult{}, err
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := qc.recv(&started, 10*time.Second); err != nil {
		return execResult{}, fmt.Errorf("guest-exec %q: %w", cmd, err)
	}
	end := time.Now().Add(timeout)
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		if err := qc.send("guest-exec-status", map[string]any{"pid": started.PID}); err != nil {
			return execResult{}, err
		}
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			Signal   int    `json:"signal"`
			Out      string `json:"out-data"`
			Err      string `json:"err-data"`
		}
		if err := qc.recv(&st, 10*time.Second); err != nil {
			return execResult{}, fmt.Errorf("guest-exec-status %q: %w", cmd, err)
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.Out)
			serr, _ := base64.StdEncoding.DecodeString(st.Err)
			code := st.ExitCode
			if st.Signal != 0 {
				code = 128 + st.Signal
			}
			return execResult{Code: code, Stdout: string(out), Stderr: string(serr)}, nil
		}
		if time.Now().After(end) {
			return execResult{}, fmt.Errorf("guest command %q still running after %s", cmd, timeout)
		}
		time.Sleep(delay)
	}
}

// fire starts cmd in the guest without waiting for it (reboot, poweroff:
// the agent goes away with the guest).
func (q *qga) fire(cmd string) error {
	qc, err := q.dial(10 * time.Second)
	if err != nil {
		return err
	}
	defer qc.c.Close()
	if err := qc.send("guest-exec", map[string]any{"path": "/bin/sh", "arg": []string{"-c", cmd}}); err != nil {
		return err
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := qc.recv(&started, 10*time.Second); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("guest-exec %q: %w", cmd, err)
	}
	return nil
}
