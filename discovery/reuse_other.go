//go:build !unix

package discovery

import "syscall"

// reuseAddr does nothing here: only one socket per host can then bind the
// multicast port.
func reuseAddr(_, _ string, _ syscall.RawConn) error { return nil }
