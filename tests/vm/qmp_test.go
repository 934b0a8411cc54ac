//go:build vmlab

package vm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// qmpCommand sends one QMP command on QEMU's monitor socket (after the
// greeting and qmp_capabilities) and returns its error, if any.
func qmpCommand(sock, cmd string, args map[string]any) error {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadBytes('\n'); err != nil { // greeting
		return fmt.Errorf("qmp greeting: %w", err)
	}
	call := func(cmd string, args map[string]any) error {
		m := map[string]any{"execute": cmd}
		if args != nil {
			m["arguments"] = args
		}
		b, _ := json.Marshal(m)
		if _, err := c.Write(append(b, '\n')); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("qmp %s: %w", cmd, err)
			}
			var rep struct {
				Event  string          `json:"event"`
				Return json.RawMessage `json:"return"`
				Error  *struct {
					Desc string `json:"desc"`
				} `json:"error"`
			}
			if err := json.Unmarshal(line, &rep); err != nil {
				return fmt.Errorf("qmp %s: bad reply %q", cmd, line)
			}
			if rep.Event != "" {
				continue
			}
			if rep.Error != nil {
				return fmt.Errorf("qmp %s: %s", cmd, rep.Error.Desc)
			}
			return nil
		}
	}
	if err := call("qmp_capabilities", nil); err != nil {
		return err
	}
	return call(cmd, args)
}
