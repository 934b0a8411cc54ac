package tpm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/nodereg/nodereg/internal/host"
)

// Default device candidates, in order: the kernel resource manager
// multiplexes processes and flushes our transients when we exit; the raw
// device is exclusive and leaks whatever is not flushed.
const (
	DeviceRM  = host.TPMDeviceRM
	DeviceRaw = host.TPMDeviceRaw
	// SocketScheme prefixes a swtpm data socket path in Options.Device.
	SocketScheme = "unix://"
)

// defaultCommandTimeout bounds one command on a swtpm socket. swtpm serves one
// connection at a time and queues the others silently, so without a bound a
// second user would hang instead of reporting ErrBusy.
const defaultCommandTimeout = 60 * time.Second

// openTransport picks the transport described by opts.
func openTransport(opts Options) (transport.TPMCloser, string, error) {
	if opts.Emulate {
		if opts.Seed == 0 {
			return nil, "", ErrBadSeed
		}
		t, err := openEmulated(opts.Seed)
		if err != nil {
			return nil, "", err
		}
		return t, fmt.Sprintf("emulated TPM (seed %d)", opts.Seed), nil
	}
	files := opts.Files
	if files == nil {
		return nil, "", errors.New("tpm: no host.FS to open the device through")
	}
	if sock, ok := strings.CutPrefix(opts.Device, SocketScheme); ok {
		path := files.Path(sock)
		timeout := opts.CommandTimeout
		if timeout <= 0 {
			timeout = defaultCommandTimeout
		}
		t, err := openSocket(files, sock, timeout)
		if err != nil {
			return nil, "", err
		}
		return t, SocketScheme + path, nil
	}
	candidates := []string{DeviceRM, DeviceRaw}
	if opts.Device != "" {
		candidates = []string{opts.Device}
	}
	var errs []error
	for _, c := range candidates {
		path := files.Path(c)
		dev, err := files.OpenDevice(c)
		if err == nil {
			return transport.FromReadWriteCloser(dev), path, nil
		}
		switch {
		case errors.Is(err, syscall.EBUSY):
			return nil, "", fmt.Errorf("opening %s: %w: another process holds it (use %s, the resource manager, or stop the other user): %w", path, ErrBusy, DeviceRM, err)
		case errors.Is(err, fs.ErrPermission):
			return nil, "", fmt.Errorf("opening %s: permission denied, run as root or in the tss group: %w", path, err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", path, err))
	}
	all := errors.Join(errs...)
	moved := ""
	if h := host.MovedHint(files, candidates[0]); h != "" && errors.Is(all, fs.ErrNotExist) {
		moved = "; " + h
	}
	return nil, "", fmt.Errorf("%w: tried %s (%w); set tpm-device to the TPM's path or unix://<swtpm socket>, or emulate-tpm: true on machines without a TPM%s",
		ErrNoDevice, strings.Join(candidatePaths(files, candidates), ", "), all, moved)
}

func candidatePaths(files host.FS, cs []string) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = files.Path(c)
	}
	return out
}

// socketTPM speaks to swtpm's data socket. It reads the response header to
// learn the full size, so short reads on the stream cannot cut a response.
type socketTPM struct {
	conn    net.Conn
	timeout time.Duration
}

func openSocket(files host.FS, sock string, timeout time.Duration) (*socketTPM, error) {
	path := files.Path(sock)
	if _, err := files.Stat(sock); err != nil {
		return nil, fmt.Errorf("%w: swtpm socket %s: %w; start swtpm or fix tpm-device", ErrNoDevice, path, err)
	}
	// Below a root it is dialed where the root's links lead inside it
	// (FS.InRoot); connect would follow a link in the last component
	// itself, out of the root, so there the socket must be the file
	// swtpm made, not a link to it.
	inRoot, err := files.InRoot(sock)
	if err != nil {
		return nil, fmt.Errorf("%w: swtpm socket %s: %w", ErrNoDevice, path, err)
	}
	if fi, err := files.Lstat(sock); !host.Live(files) && (err != nil || fi.Mode()&fs.ModeSocket == 0) {
		return nil, fmt.Errorf("%w: swtpm socket %s under --root: not a socket (%v); name swtpm's socket itself, not a link to it", ErrNoDevice, path, err)
	}
	conn, err := net.DialTimeout("unix", inRoot, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to swtpm socket %s: %w", ErrNoDevice, path, err)
	}
	return &socketTPM{conn: conn, timeout: timeout}, nil
}

func (s *socketTPM) Send(cmd []byte) ([]byte, error) {
	if err := s.conn.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		return nil, fmt.Errorf("swtpm socket: %w", err)
	}
	if _, err := s.conn.Write(cmd); err != nil {
		return nil, fmt.Errorf("swtpm socket: writing command: %w", err)
	}
	hdr := make([]byte, 10)
	if _, err := io.ReadFull(s.conn, hdr); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, fmt.Errorf("swtpm socket: %w: no answer within %s (swtpm serves one client at a time): %w", ErrBusy, s.timeout, err)
		}
		return nil, fmt.Errorf("swtpm socket: reading response header: %w", err)
	}
	size := int(binary.BigEndian.Uint32(hdr[2:6]))
	if size < 10 || size > 1<<16 {
		return nil, fmt.Errorf("swtpm socket: response size %d out of range", size)
	}
	rsp := make([]byte, size)
	copy(rsp, hdr)
	if _, err := io.ReadFull(s.conn, rsp[10:]); err != nil {
		return nil, fmt.Errorf("swtpm socket: reading response body: %w", err)
	}
	return rsp, nil
}

func (s *socketTPM) Close() error { return s.conn.Close() }

// Counts is what a Counter saw.
type Counts struct {
	Commands      int // every command sent, failed ones included
	CreatePrimary int // RSA key generations in a hierarchy
	Create        int // RSA key generations under a parent
	ByCommand     map[tpm2.TPMCC]int
}

// KeyCreations is the number of commands that generate a key, the slow ones
// on real TPMs.
func (c Counts) KeyCreations() int { return c.CreatePrimary + c.Create }

// Counter wraps a transport and counts the commands sent through it. It is
// how tests and benchmarks prove that no key is made when a cached one
// exists.
type Counter struct {
	Next transport.TPM

	mu     sync.Mutex
	counts Counts
}

// Send counts the command code (bytes 6..9 of every TPM command) and
// forwards it.
func (c *Counter) Send(cmd []byte) ([]byte, error) {
	if len(cmd) >= 10 {
		cc := tpm2.TPMCC(binary.BigEndian.Uint32(cmd[6:10]))
		c.mu.Lock()
		if c.counts.ByCommand == nil {
			c.counts.ByCommand = map[tpm2.TPMCC]int{}
		}
		c.counts.Commands++
		c.counts.ByCommand[cc]++
		switch cc {
		case tpm2.TPMCCCreatePrimary:
			c.counts.CreatePrimary++
		case tpm2.TPMCCCreate:
			c.counts.Create++
		}
		c.mu.Unlock()
	}
	return c.Next.Send(cmd)
}

// Counts returns a copy of the counts so far.
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	out.ByCommand = make(map[tpm2.TPMCC]int, len(c.counts.ByCommand))
	for k, v := range c.counts.ByCommand {
		out.ByCommand[k] = v
	}
	return out
}
