package bootstrap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/nic"
)

// RFC 5227 section 1.1 timing.
const (
	probeWait    = 1 * time.Second
	probeNum     = 3
	probeMin     = 1 * time.Second
	probeMax     = 2 * time.Second
	announceWait = 2 * time.Second
)

// ARPProber is RFC 5227 duplicate address detection on a packet socket:
// ARP requests with sender IP 0.0.0.0 for the address, and a listen, from
// the first probe until AnnounceWait after the last, for anyone who says
// they hold it (an ARP packet whose sender IP is the address) or who is
// probing for it at the same time (a probe for the address from another
// MAC). It sends no announcement: NetworkManager announces the address
// when it configures it. With ProbeNum 0 (the zero value) every field
// takes RFC 5227's value, about 4-7 s per address; tests shorten it.
type ARPProber struct {
	ProbeWait    time.Duration // random delay before the first probe (PROBE_WAIT)
	ProbeNum     int           // probes sent (PROBE_NUM)
	ProbeMin     time.Duration // spacing between probes, at random in [ProbeMin, ProbeMax]
	ProbeMax     time.Duration
	AnnounceWait time.Duration // listening after the last probe (ANNOUNCE_WAIT)
}

// ErrLinkDown and ErrNoCarrier are returned for an interface that is
// administratively down or has no link: a probe there would hear nothing
// and call every address free. LinkReady brings a link up and waits.
var (
	ErrLinkDown  = errclass.New(errclass.Transient, probeFailed, "interface is down")
	ErrNoCarrier = errclass.New(errclass.Transient, probeFailed, "interface has no carrier")
)

func (p *ARPProber) timing() (wait time.Duration, num int, lo, hi, announce time.Duration) {
	wait, num, lo, hi, announce = p.ProbeWait, p.ProbeNum, p.ProbeMin, p.ProbeMax, p.AnnounceWait
	if num <= 0 {
		wait, num, lo, hi, announce = probeWait, probeNum, probeMin, probeMax, announceWait
	}
	if hi < lo {
		hi = lo
	}
	return
}

func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}

// Probe checks addr on iface's link. It needs CAP_NET_RAW and an interface
// that is up; the wait is bounded by the timing and by ctx.
func (p *ARPProber) Probe(ctx context.Context, iface string, addr netip.Addr) (ProbeResult, error) {
	if !addr.Unmap().Is4() {
		return ProbeResult{}, fmt.Errorf("ARP probe: %s is not an IPv4 address", addr)
	}
	target := addr.Unmap().As4()
	ifi, err := probeInterface(iface)
	if err != nil {
		return ProbeResult{}, err
	}
	own := ifi.HardwareAddr
	proto := htons(unix.ETH_P_ARP)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto))
	if err != nil {
		return ProbeResult{}, fmt.Errorf("ARP probe: packet socket (needs CAP_NET_RAW): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return ProbeResult{}, fmt.Errorf("ARP probe: binding to %s: %w", iface, err)
	}
	bcast := &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	probe := arpProbe(own, target)

	frames := frameReader{
		recv:    func(b []byte) (int, unix.Sockaddr, error) { return unix.Recvfrom(fd, b, 0) },
		buf:     make([]byte, 1500),
		ifindex: ifi.Index,
		own:     own,
		target:  target,
	}

	wait, num, lo, hi, announce := p.timing()
	next := time.Now().Add(jitter(0, wait))
	sent := 0
	var end time.Time
	for {
		if err := ctx.Err(); err != nil {
			return ProbeResult{}, fmt.Errorf("ARP probe of %s: %w", addr, err)
		}
		now := time.Now()
		if sent < num && !now.Before(next) {
			if err := unix.Sendto(fd, probe, 0, bcast); err != nil {
				return ProbeResult{}, fmt.Errorf("ARP probe: sending on %s: %w", iface, err)
			}
			sent++
			if sent < num {
				next = now.Add(jitter(lo, hi))
			} else {
				end = now.Add(announce)
			}
		}
		if sent == num && !now.Before(end) {
			return ProbeResult{}, nil
		}
		until := next
		if sent == num {
			until = end
		}
		// Poll in short slices so a cancelled ctx ends the probe promptly.
		ms := min(time.Until(until), 100*time.Millisecond).Milliseconds()
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(ms, 1)))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return ProbeResult{}, fmt.Errorf("ARP probe: poll: %w", err)
		}
		if n <= 0 {
			continue
		}
		holder, taken, err := frames.read(ctx, until)
		if err != nil {
			return ProbeResult{}, fmt.Errorf("ARP probe: receiving on %s: %w", iface, err)
		}
		if taken {
			return ProbeResult{Taken: true, Holder: holder}, nil
		}
	}
}

// probeInterface is iface when it can be probed: up, with carrier and an
// Ethernet address.
func probeInterface(iface string) (*net.Interface, error) {
	ifi, err := nic.ByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ARP probe: interface %s: %w", iface, err)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("ARP probe: %s: %w", iface, ErrLinkDown)
	}
	if ifi.Flags&net.FlagRunning == 0 {
		return nil, fmt.Errorf("ARP probe: %s: %w", iface, ErrNoCarrier)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("ARP probe: %s has no Ethernet address", iface)
	}
	return ifi, nil
}

// maxFramesPerPoll bounds one batch of reads. A segment that never falls
// silent (an ARP storm, a hostile neighbour) would otherwise keep the
// probe reading past a cancel (SIGTERM) and past its own timing.
const maxFramesPerPoll = 64

// frameReader reads the ARP frames queued on the probe's socket.
type frameReader struct {
	recv    func([]byte) (int, unix.Sockaddr, error)
	buf     []byte
	ifindex int
	own     net.HardwareAddr
	target  [4]byte
}

// read takes the frames queued now, at most maxFramesPerPoll, and stops
// early when ctx is done or until has passed; it reports a frame that shows
// the target taken, with its sender.
func (f *frameReader) read(ctx context.Context, until time.Time) (net.HardwareAddr, bool, error) {
	for range maxFramesPerPoll {
		if ctx.Err() != nil || !time.Now().Before(until) {
			return nil, false, nil
		}
		m, from, err := f.recv(f.buf)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		// Skip our own probes looped back to the socket, and frames of
		// other interfaces queued between socket() and bind(): the
		// address may be legitimately used on another segment.
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Pkttype == unix.PACKET_OUTGOING || ll.Ifindex != f.ifindex {
			continue
		}
		if holder, taken := conflicts(f.buf[:m], f.own, f.target); taken {
			return holder, true, nil
		}
	}
	return nil, false, nil
}

// ARP over Ethernet for IPv4 (RFC 826): fixed 28-byte body.
const (
	arpLen       = 28
	arpRequest   = 1
	etherTypeIP4 = 0x0800
)

// arpProbe builds an ARP request for target with sender IP 0.0.0.0 and an
// all-zero target MAC (RFC 5227 section 2.1.1), so no neighbour cache
// learns a mapping from it.
func arpProbe(own net.HardwareAddr, target [4]byte) []byte {
	b := make([]byte, arpLen)
	binary.BigEndian.PutUint16(b[0:], unix.ARPHRD_ETHER)
	binary.BigEndian.PutUint16(b[2:], etherTypeIP4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], arpRequest)
	copy(b[8:14], own)
	// sender IP b[14:18], target MAC b[18:24]: zero
	copy(b[24:28], target[:])
	return b
}

// conflicts reads one received ARP packet: the address is taken when
// someone else sends with it as sender IP (a reply to our probe, a request,
// an announcement), or probes for it at the same time (sender IP 0.0.0.0,
// target IP the address, a MAC not ours).
func conflicts(pkt []byte, own net.HardwareAddr, target [4]byte) (net.HardwareAddr, bool) {
	if len(pkt) < arpLen ||
		binary.BigEndian.Uint16(pkt[0:]) != unix.ARPHRD_ETHER ||
		binary.BigEndian.Uint16(pkt[2:]) != etherTypeIP4 || pkt[4] != 6 || pkt[5] != 4 {
		return nil, false
	}
	sha := net.HardwareAddr(append([]byte(nil), pkt[8:14]...))
	if bytes.Equal(sha, own) {
		return nil, false
	}
	spa, tpa := pkt[14:18], pkt[24:28]
	if bytes.Equal(spa, target[:]) {
		return sha, true
	}
	if binary.BigEndian.Uint16(pkt[6:]) == arpRequest && bytes.Equal(spa, []byte{0, 0, 0, 0}) && bytes.Equal(tpa, target[:]) {
		return sha, true
	}
	return nil, false
}

// htons puts a protocol number in network byte order, as packet sockets
// want it in socket() and sockaddr_ll.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
