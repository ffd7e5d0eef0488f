package discovery

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

// serve accepts unicast discovery connections.
func (r *Registrar) serve() {
	defer r.wg.Done()
	b := backoff.New(5*time.Millisecond, time.Second)
	for {
		conn, err := r.ln.Accept()
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors, say: wait a little, then go on.
			r.log.Warn("djinn registrar: accept failed", "err", err)
			if !b.Wait(r.ctx) {
				return
			}
			continue
		}
		b.Reset()
		select {
		case r.conns <- struct{}{}:
		default:
			conn.Close()
			r.stats.add(func(s *RegistrarStats) { s.UnicastRejected++ })
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			count := r.serveConn(conn)
			<-r.conns
			r.stats.add(count) // after the slot is free: a test that sees the count can connect
		}()
	}
}

// serveConn answers one unicast discovery connection, closes it and returns
// how to count it.
func (r *Registrar) serveConn(conn net.Conn) func(*RegistrarStats) {
	defer conn.Close()
	stop := context.AfterFunc(r.ctx, func() { conn.Close() })
	defer stop()
	err := conn.SetDeadline(time.Now().Add(r.cfg.Timeout))
	if err == nil {
		err = wire.ServeUnicast(conn, r.response(), r.cfg.MaxRequestSize)
	}
	var count func(*RegistrarStats)
	switch {
	case err == nil:
		count = func(s *RegistrarStats) { s.UnicastServed++ }
	case errors.Is(err, wire.ErrNoFormat):
		count = func(s *RegistrarStats) { s.UnicastNoFormat++ }
	case errors.Is(err, wire.ErrTooLarge):
		count = func(s *RegistrarStats) { s.UnicastTooLarge++ }
	case errors.Is(err, wire.ErrVersion), errors.Is(err, wire.ErrFormat):
		count = func(s *RegistrarStats) { s.UnicastUnsupported++ }
	case errors.Is(err, wire.ErrMalformed):
		count = func(s *RegistrarStats) { s.UnicastMalformed++ }
	default:
		count = func(s *RegistrarStats) { s.UnicastFailed++ }
	}
	if err != nil && r.ctx.Err() == nil {
		r.log.Debug("djinn registrar: unicast discovery", "peer", conn.RemoteAddr().String(), "err", err)
	}
	return count
}

// hearRequests reads multicast requests and answers those meant for this
// registrar.
func (r *Registrar) hearRequests() {
	defer r.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, ok, err := r.reqs.read(buf)
		if err != nil {
			if r.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			r.log.Warn("djinn registrar: reading multicast requests", "err", err)
			if !backoff.Pause(r.ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		if !ok {
			continue
		}
		req, err := wire.DecodeMulticastRequest(buf[:n])
		if err != nil {
			unsupported := errors.Is(err, wire.ErrVersion) || errors.Is(err, wire.ErrFormat)
			r.stats.add(func(s *RegistrarStats) {
				if unsupported {
					s.RequestsUnsupported++
				} else {
					s.RequestsMalformed++
				}
			})
			r.log.Debug("djinn registrar: multicast request ignored", "from", from.src.String(), "err", err)
			continue
		}
		r.requested(req, from)
	}
}

// requested decides whether to answer a multicast request (DJ.2.4.4): it
// must seek one of the registrar's groups (or any, with none) and must not
// list the registrar as heard. The answer is unicast discovery over a TCP
// connection the registrar opens to the requester's response server.
func (r *Registrar) requested(req wire.MulticastRequest, from datagram) {
	r.mu.Lock()
	groups := r.groups
	r.mu.Unlock()
	switch {
	case len(groups) == 0 || len(req.Groups) > 0 && !newWanted(req.Groups, false).wants(groups):
		r.stats.add(func(s *RegistrarStats) { s.RequestsOtherGroups++ })
		return
	case containsID(req.Heard, r.cfg.ServiceID):
		r.stats.add(func(s *RegistrarStats) { s.RequestsHeard++ })
		return
	}
	target := net.JoinHostPort(req.Host, strconv.Itoa(req.Port))
	r.mu.Lock()
	_, busy := r.responding[target]
	if !busy {
		select {
		case r.resps <- struct{}{}:
			r.responding[target] = struct{}{}
		default:
			busy = true
		}
	}
	r.mu.Unlock()
	if busy {
		r.stats.add(func(s *RegistrarStats) { s.RequestsDropped++ })
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.responding, target)
			r.mu.Unlock()
			<-r.resps
		}()
		r.respond(target, from)
	}()
}

func containsID(ids []djinn.ID, id djinn.ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// respond connects to a requester's response server and runs unicast
// discovery there. The registrar writes nothing before the requester has
// completed the TCP handshake and sent a valid unicast request, which a
// host whose address was spoofed into the request never does: it gets a
// SYN, or two, and no data.
func (r *Registrar) respond(target string, from datagram) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.Timeout)
	defer cancel()
	d := net.Dialer{
		Timeout: min(r.cfg.Timeout, responseDialTimeout),
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			return checkTarget(address, from.loopback)
		},
	}
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		spoofed := errors.Is(err, errForbiddenTarget)
		r.stats.add(func(s *RegistrarStats) {
			if spoofed {
				s.RequestsSpoofed++
			} else {
				s.ResponsesFailed++
			}
		})
		r.log.Debug("djinn registrar: multicast request not answered", "target", target, "from", from.src.String(), "err", err)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	dl, _ := ctx.Deadline()
	err = conn.SetDeadline(dl)
	if err == nil {
		err = wire.ServeUnicast(conn, r.response(), r.cfg.MaxRequestSize)
	}
	r.stats.add(func(s *RegistrarStats) {
		if err == nil {
			s.RequestsAnswered++
		} else {
			s.ResponsesFailed++
		}
	})
	if err != nil && r.ctx.Err() == nil {
		r.log.Debug("djinn registrar: answering a multicast request", "target", target, "err", err)
	}
}

// checkTarget refuses the addresses a multicast request may not make a
// registrar connect to: wildcard, multicast and broadcast addresses, and
// loopback unless the request arrived on a loopback interface, where only
// this host can send (a request from elsewhere naming 127.0.0.1 would make
// the registrar probe its own host's ports).
func checkTarget(address string, viaLoopback bool) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return errForbiddenTarget
	}
	a := ap.Addr().Unmap()
	switch {
	case a.IsUnspecified(), a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errForbiddenTarget
	case a.IsLoopback() && !viaLoopback:
		return errForbiddenTarget
	}
	return nil
}
