// Package netlisten words a failure to listen on an address, for the public
// packages that open listeners for their callers (client, discovery).
package netlisten

import (
	"errors"
	"net"

	"github.com/djinn-go/djinn"
)

// ErrorKind is the kind of err, a failure to listen on an address: the
// caller's mistake (InvalidArgument) when the address is malformed or
// names a host that does not exist, and otherwise (a port in use, say) a
// condition of the machine (Unavailable).
func ErrorKind(err error) djinn.Kind {
	var ae *net.AddrError
	var dns *net.DNSError
	if errors.As(err, &ae) || errors.As(err, &dns) && dns.IsNotFound {
		return djinn.InvalidArgument
	}
	return djinn.Unavailable
}

// Error is err, a failure to listen on addr for what, as an error of its
// kind naming the address.
func Error(what, addr string, err error) error {
	return djinn.Errorf(ErrorKind(err), "%s %q: %v", what, addr, err)
}
