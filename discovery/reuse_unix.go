//go:build unix

package discovery

import "syscall"

// reuseAddr sets SO_REUSEADDR, so that every registrar and discovering
// entity on a host can bind the multicast port 4160 at once, as Java's
// MulticastSocket does.
func reuseAddr(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
