package bootstrap

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/nic"
)

// LinkReady sets iface administratively up when it is down and waits,
// bounded by ctx, for its carrier, so a probe right after it hears the
// segment. On a DHCP-less first boot NetworkManager may have left the NIC
// down (no-auto-default, or no profile for it); setting it up is what NM
// does next anyway when it activates the bootstrap profile. It returns
// whether it changed the link, for the log.
func LinkReady(ctx context.Context, iface string) (raised bool, err error) {
	ifi, err := nic.ByName(iface)
	if err != nil {
		return false, fmt.Errorf("bootstrap link %s: %w", iface, err)
	}
	if ifi.Flags&net.FlagUp == 0 {
		if err := setUp(iface); err != nil {
			return false, fmt.Errorf("bootstrap link %s: setting up: %w", iface, err)
		}
		raised = true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ifi, err = nic.ByName(iface)
		if err != nil {
			return raised, fmt.Errorf("bootstrap link %s: %w", iface, err)
		}
		if ifi.Flags&net.FlagRunning != 0 {
			return raised, nil
		}
		select {
		case <-ctx.Done():
			return raised, fmt.Errorf("bootstrap link %s: %w (%w)", iface, ErrNoCarrier, ctx.Err())
		case <-tick.C:
		}
	}
}

func setUp(iface string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(iface)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
