package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"golang.org/x/net/ipv4"

	"github.com/djinn-go/djinn"
)

// maxDatagram is the receive buffer of the multicast sockets: any UDP
// payload. Peers may send packets larger than 512 bytes (River lets them be
// configured so) and the decoders accept them.
const maxDatagram = 64 << 10

// multicastInterfaces returns the interfaces named, or when names is empty
// every interface that is up and multicast-capable. A name that does not
// exist, or names an interface that is down or cannot multicast, is an
// error of kind InvalidArgument.
func multicastInterfaces(names []string) ([]net.Interface, error) {
	if len(names) == 0 {
		all, err := net.Interfaces()
		if err != nil {
			return nil, djinn.Errorf(djinn.Unavailable, "discovery: listing network interfaces: %v", err)
		}
		var out []net.Interface
		for _, ifi := range all {
			if ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0 {
				out = append(out, ifi)
			}
		}
		return out, nil
	}
	out := make([]net.Interface, 0, len(names))
	for _, name := range names {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "discovery: interface %q: %v", name, err)
		}
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "discovery: interface %q (flags %v): not up and multicast-capable", name, ifi.Flags)
		}
		out = append(out, *ifi)
	}
	return out, nil
}

// interfaceIPv4 returns the first IPv4 address of an interface.
func interfaceIPv4(ifi net.Interface) (netip.Addr, bool) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// receiver reads the packets sent to one multicast group on a set of
// interfaces. Its socket is bound to the group's port on every address, so
// it also sees other groups' packets to that port (Linux delivers every
// group joined by any socket of the host) and unicast ones; read keeps only
// packets addressed to its group that arrived on one of its interfaces.
type receiver struct {
	conn     net.PacketConn
	pc       *ipv4.PacketConn
	group    netip.Addr
	ifs      map[int]bool // interface indexes joined
	loopback map[int]bool // which of them are loopback interfaces
}

// listenGroup joins group on each interface that accepts it. The interfaces
// that failed are returned with their errors; an error is returned only when
// the socket cannot be made or no interface joined.
func listenGroup(group netip.AddrPort, ifaces []net.Interface) (*receiver, []error, error) {
	lc := net.ListenConfig{Control: reuseAddr}
	conn, err := lc.ListenPacket(context.Background(), "udp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(group.Port()))))
	if err != nil {
		return nil, nil, djinn.Errorf(djinn.Unavailable, "discovery: listening for multicast %v: %v", group, err)
	}
	r := &receiver{conn: conn, pc: ipv4.NewPacketConn(conn), group: group.Addr(), ifs: make(map[int]bool), loopback: make(map[int]bool)}
	var failed []error
	gaddr := &net.UDPAddr{IP: group.Addr().AsSlice()}
	for i := range ifaces {
		if err := r.pc.JoinGroup(&ifaces[i], gaddr); err != nil {
			failed = append(failed, fmt.Errorf("interface %s: joining %v: %w", ifaces[i].Name, group.Addr(), err))
			continue
		}
		r.ifs[ifaces[i].Index] = true
		r.loopback[ifaces[i].Index] = ifaces[i].Flags&net.FlagLoopback != 0
	}
	if len(r.ifs) == 0 {
		conn.Close()
		return nil, failed, djinn.Errorf(djinn.Unavailable, "discovery: could not join %v on any interface: %v", group.Addr(), errors.Join(failed...))
	}
	if err := r.pc.SetControlMessage(ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		conn.Close()
		return nil, failed, djinn.Errorf(djinn.Unavailable, "discovery: multicast socket control messages: %v", err)
	}
	return r, failed, nil
}

// datagram is where a datagram came from.
type datagram struct {
	src netip.Addr // its source address
	// loopback: it arrived on a loopback interface, so it was sent by this
	// host (the kernel delivers nothing from outside there).
	loopback bool
}

// read reads the next datagram into buf. ok is false for a datagram that is
// not this receiver's (another group, a unicast one, another interface).
func (r *receiver) read(buf []byte) (n int, from datagram, ok bool, err error) {
	n, cm, src, err := r.pc.ReadFrom(buf)
	if err != nil {
		return 0, datagram{}, false, err
	}
	if cm == nil || !r.ifs[cm.IfIndex] {
		return n, datagram{}, false, nil
	}
	if dst, okDst := netip.AddrFromSlice(cm.Dst); !okDst || dst.Unmap() != r.group {
		return n, datagram{}, false, nil
	}
	if u, okU := src.(*net.UDPAddr); okU {
		a, _ := netip.AddrFromSlice(u.IP)
		from.src = a.Unmap()
	}
	from.loopback = r.loopback[cm.IfIndex]
	return n, from, true, nil
}

func (r *receiver) Close() error { return r.conn.Close() }

// sender sends multicast packets out of each of its interfaces.
type sender struct {
	conn   net.PacketConn
	pc     *ipv4.PacketConn
	ifaces []net.Interface

	mu sync.Mutex // serializes sends: the outgoing interface is socket state
}

func newSender(ifaces []net.Interface, ttl int) (*sender, error) {
	conn, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "discovery: multicast send socket: %v", err)
	}
	s := &sender{conn: conn, pc: ipv4.NewPacketConn(conn), ifaces: ifaces}
	if err := s.pc.SetMulticastTTL(ttl); err != nil {
		conn.Close()
		return nil, djinn.Errorf(djinn.Unavailable, "discovery: multicast ttl %d: %v", ttl, err)
	}
	// Peers on this host (other registrars, clients) must hear us too.
	if err := s.pc.SetMulticastLoopback(true); err != nil {
		conn.Close()
		return nil, djinn.Errorf(djinn.Unavailable, "discovery: multicast loopback: %v", err)
	}
	return s, nil
}

// send sends packets to dst out of ifi.
func (s *sender) send(ifi *net.Interface, dst netip.AddrPort, packets [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.pc.SetMulticastInterface(ifi); err != nil {
		return fmt.Errorf("interface %s: %w", ifi.Name, err)
	}
	to := net.UDPAddrFromAddrPort(dst)
	for _, p := range packets {
		if _, err := s.pc.WriteTo(p, nil, to); err != nil {
			return fmt.Errorf("interface %s: sending to %v: %w", ifi.Name, dst, err)
		}
	}
	return nil
}

func (s *sender) Close() error { return s.conn.Close() }
