package robust

import (
	"bytes"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// Sources of connections whose sender a proxy cannot tell from their
// bytes: the suite's clients, and gRPC calls between members (a
// member's advertised address, used by the others and in references).
const (
	Clients = "clients"
	Peers   = "peers"
)

// Link is a directed link: bytes sent by From to To.
type Link struct{ From, To string }

// Rule is what the network does to a link's bytes.
type Rule struct {
	Drop  bool          // the bytes never arrive (a partition, one way)
	Delay time.Duration // every chunk arrives this much later
}

// Net is the fault-injecting network between the members and their
// clients: one Proxy per listening port, every connection through it, and
// the rules that say what happens to each directed link. Changing a rule
// that drops cuts the link's open connections, so a TCP stream never
// resumes after losing bytes in the middle: a partition looks to the
// members like connections that time out, then fail to reach the peer.
type Net struct {
	mu      sync.Mutex
	rules   map[Link]Rule       // guarded by mu
	conns   map[*pconn]struct{} // guarded by mu
	proxies []*Proxy            // guarded by mu
	ids     [][]byte            // member ids to sniff, guarded by mu
	// pids returns the running members' processes (pid → member id):
	// how a TLS connection's sender is told.
	pids func() map[int]string // guarded by mu
	// The TLS Raft connections whose sender was told, and not told.
	told, untold int            // guarded by mu
	closed       bool           // guarded by mu
	wg           sync.WaitGroup // the proxies' goroutines
}

// NewNet returns a network with no rules: every link delivers.
func NewNet() *Net {
	return &Net{rules: map[Link]Rule{}, conns: map[*pconn]struct{}{}}
}

// Member declares a member id; raft proxies tell a plaintext connection's
// sender by the header of its first request, which names the sending
// member, and a TLS connection's by the process holding its socket (see
// Processes).
func (n *Net) Member(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids = append(n.ids, []byte(id))
}

// Set sets link's rule and cuts the link's open connections when the rule
// drops or stops dropping.
func (n *Net) Set(l Link, r Rule) {
	n.mu.Lock()
	old := n.rules[l]
	if r == (Rule{}) {
		delete(n.rules, l)
	} else {
		n.rules[l] = r
	}
	var cut []*pconn
	if old.Drop != r.Drop {
		cut = n.connsLocked(func(c *pconn) bool { return c.carries(l) })
	}
	n.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
}

// Heal removes every rule, cutting the connections that dropped bytes.
func (n *Net) Heal() {
	n.mu.Lock()
	links := make([]Link, 0, len(n.rules))
	for l := range n.rules {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		n.Set(l, Rule{})
	}
}

// Cut closes every open connection to or from member id (all of them for
// ""): the peers see a reset and dial again.
func (n *Net) Cut(id string) int {
	n.mu.Lock()
	cut := n.connsLocked(func(c *pconn) bool { return id == "" || c.from == id || c.to == id })
	n.mu.Unlock()
	for _, c := range cut {
		c.close()
	}
	return len(cut)
}

func (n *Net) connsLocked(match func(*pconn) bool) []*pconn {
	var out []*pconn
	for c := range n.conns {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

func (n *Net) rule(l Link) Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rules[l]
}

// Close closes every proxy and connection and waits for their goroutines.
func (n *Net) Close() {
	n.mu.Lock()
	n.closed = true
	ps := n.proxies
	cs := n.connsLocked(func(*pconn) bool { return true })
	n.mu.Unlock()
	for _, p := range ps {
		p.ln.Close()
	}
	for _, c := range cs {
		c.close()
	}
	n.wg.Wait()
}

// Proxy listens on a loopback port the system picks and forwards each
// connection to its member's current address.
type Proxy struct {
	net   *Net
	to    string // the member behind it
	from  string // who dials it, unless sniffed
	sniff bool   // tell the sender by the member id in its first bytes
	ln    net.Listener

	mu     sync.Mutex
	target string // guarded by mu; "" while the member is down
}

// Listen starts a proxy in front of member to, dialled by from (Clients
// or Peers); sniff, for Raft ports, tells the sending member instead.
func (n *Net) Listen(to, from string, sniff bool) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{net: n, to: to, from: from, sniff: sniff, ln: ln}
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	n.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target sets the member's real address.
func (p *Proxy) Target(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

func (p *Proxy) serve() {
	defer p.net.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.net.wg.Add(1)
		go p.handle(c)
	}
}

// pconn is one proxied connection: from dialled to through the proxy.
type pconn struct {
	from, to string
	in, out  net.Conn
	once     sync.Once
}

func (c *pconn) carries(l Link) bool {
	return c.from == l.From && c.to == l.To || c.from == l.To && c.to == l.From
}

func (c *pconn) close() {
	c.once.Do(func() {
		c.in.Close()
		if c.out != nil {
			c.out.Close()
		}
	})
}

func (p *Proxy) handle(in net.Conn) {
	defer p.net.wg.Done()
	from, first := p.from, []byte(nil)
	if p.sniff {
		from, first = p.sender(in)
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	c := &pconn{from: from, to: p.to, in: in}
	if target != "" {
		out, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err == nil {
			c.out = out
		}
	}
	if c.out == nil {
		in.Close()
		return
	}
	if !p.net.add(c) {
		c.close()
		return
	}
	defer p.net.remove(c)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.net.pump(c, Link{From: from, To: p.to}, c.out, in, first) }()
	go func() { defer wg.Done(); p.net.pump(c, Link{From: p.to, To: from}, in, c.out, nil) }()
	wg.Wait()
}

func (n *Net) add(c *pconn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *Net) remove(c *pconn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

// sender decodes the connection's first Raft request as far as its
// header, which names the sending member, and returns the member and the
// bytes read. Every Raft request is a type byte and a msgpack value whose
// header is the embedded RPCHeader; no other bytes are trusted (the
// entries of an append may name any member).
func (p *Proxy) sender(in net.Conn) (string, []byte) {
	var read bytes.Buffer
	_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer in.SetReadDeadline(time.Time{})
	r := io.TeeReader(in, &read)
	var typ [1]byte
	if _, err := io.ReadFull(r, typ[:]); err != nil {
		return p.from, read.Bytes()
	}
	if typ[0] == tlsHandshake {
		id := p.net.owner(in)
		p.net.tell(id != "")
		if id != "" {
			return id, read.Bytes()
		}
		return p.from, read.Bytes()
	}
	var req struct{ raft.RPCHeader }
	if err := codec.NewDecoder(r, &codec.MsgpackHandle{}).Decode(&req); err != nil {
		return p.from, read.Bytes()
	}
	if id := string(req.ID); p.net.isMember(id) {
		return id, read.Bytes()
	}
	return p.from, read.Bytes()
}

// tlsHandshake is the first byte of a TLS connection (a handshake
// record), which no Raft request type is.
const tlsHandshake = 0x16

// Processes sets how the network finds the running members' processes.
func (n *Net) Processes(pids func() map[int]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pids = pids
}

func (n *Net) tell(told bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if told {
		n.told++
	} else {
		n.untold++
	}
}

// TLSSenders counts the TLS Raft connections whose sender was told by its
// process, and those whose sender was not (its process gone first): their
// links are the anonymous Peers'.
func (n *Net) TLSSenders() (told, untold int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.told, n.untold
}

// owner is the member whose process dialled in, or "".
func (n *Net) owner(in net.Conn) string {
	n.mu.Lock()
	pids := n.pids
	n.mu.Unlock()
	if pids == nil {
		return ""
	}
	return socketOwner(in.RemoteAddr(), in.LocalAddr(), pids())
}

func (n *Net) isMember(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.ids {
		if string(m) == id {
			return true
		}
	}
	return false
}

// chunk is bytes read at a time, to be written once the link's delay has
// passed.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst under the link's rule, read as each chunk
// arrives: dropped chunks are discarded, delayed ones written in order
// once due.
func (n *Net) pump(c *pconn, l Link, dst, src net.Conn, first []byte) {
	defer c.close()
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				<-time.After(d)
			}
			if _, err := dst.Write(ch.b); err != nil {
				c.close()
				for range q {
				}
				return
			}
		}
	}()
	defer func() { close(q); <-done }()
	if first != nil && !n.rule(l).Drop {
		q <- chunk{b: first, due: time.Now().Add(n.rule(l).Delay)}
	}
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			r := n.rule(l)
			if !r.Drop {
				q <- chunk{b: bytes.Clone(buf[:k]), due: time.Now().Add(r.Delay)}
			}
		}
		if err != nil {
			return
		}
	}
}
