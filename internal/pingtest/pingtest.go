// Package pingtest pings a gRPC server over HTTP/2 the way a client's
// keepalive does, at a pace a test chooses, and reports whether the
// server answered with GOAWAY: the test of a server's keepalive
// enforcement policy without waiting out gRPC's least client interval.
// Each ping is sent a chosen interval after the answer to the previous
// one was read, so the server sees them at least that far apart whatever
// the machine's load: the outcome does not depend on timing.
package pingtest

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
)

// Result is what the server answered.
type Result struct {
	Acked  int    // pings acknowledged
	GoAway string // the debug data of the server's GOAWAY ("too_many_pings"); "" when none came
}

// Ping connects to the gRPC server at addr (over TLS with cfg, offering h2,
// when cfg is not nil), opens no stream, and sends n pings, each one every
// after the previous one's acknowledgement was read. It returns after the
// n-th acknowledgement, or at the first GOAWAY; a GOAWAY sent for a ping
// reaches it before the next ping's acknowledgement. wait bounds the whole
// exchange, so that a server that never answers fails the test rather than
// hang it.
func Ping(addr string, cfg *tls.Config, n int, every, wait time.Duration) (Result, error) {
	conn, err := dial(addr, cfg)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(wait)); err != nil {
		return Result{}, err
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		return Result{}, err
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		return Result{}, err
	}
	var res Result
	for i := range n {
		if i > 0 {
			time.Sleep(every) // the pace of the pings: an input, not a wait for an event
		}
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			return res, err
		}
		if err := awaitAck(fr, &res); err != nil || res.GoAway != "" {
			return res, err
		}
	}
	return res, nil
}

func dial(addr string, cfg *tls.Config) (net.Conn, error) {
	if cfg == nil {
		return net.Dial("tcp", addr)
	}
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	return tls.Dial("tcp", addr, cfg)
}

// awaitAck reads frames until a ping's acknowledgement or a GOAWAY,
// acknowledging the server's settings on the way.
func awaitAck(fr *http2.Framer, res *Result) error {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return fmt.Errorf("after %d acknowledged pings: %w", res.Acked, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if f.IsAck() {
				res.Acked++
				return nil
			}
		case *http2.GoAwayFrame:
			res.GoAway = string(f.DebugData())
			return nil
		}
	}
}
