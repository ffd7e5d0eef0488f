package robust

import (
	"fmt"
	"slices"
	"sync"
)

// DeliveryLog is what the delivery workload saw, registration by
// registration.
type DeliveryLog struct {
	mu   sync.Mutex
	regs []*RegLog // guarded by mu, as is every RegLog in it
}

// RegLog is one registration's history: the events its generator sent and
// the mailbox stored (Notify answered), and what its listener received.
type RegLog struct {
	Name      string // the registration's name in the run, carried by its events
	Principal string // who owns it, carried by its events
	Shared    bool   // received over the connection's shared stream
	Sent      int64  // the highest sequence number sent
	Acked     []Notified
	// Streams is, per delivery stream the listener opened, the index the
	// mailbox had reported as recorded acknowledged before it opened.
	Streams []uint64
	Got     []Delivered // in the order received
	// Ended is the phase in which the registration's lease was cancelled
	// ("" while it lives).
	Ended string
}

// Notified is an event the mailbox answered Notify for: it is stored.
type Notified struct {
	Seq   int64
	Phase string
}

// Delivered is one event a listener received.
type Delivered struct {
	Stream          int // into RegLog.Streams
	Index           uint64
	Seq             int64
	From, Principal string // the registration and principal the event was sent to
	Phase           string
}

// add starts a registration's history.
func (l *DeliveryLog) add(g *RegLog) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.regs = append(l.regs, g)
}

func (l *DeliveryLog) update(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
}

// missing returns how many stored events of live registrations g's
// listener has not received.
func (l *DeliveryLog) missing(g *RegLog) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.Ended != "" {
		return 0
	}
	got := map[int64]bool{}
	for _, d := range g.Got {
		got[d.Seq] = true
	}
	n := 0
	for _, a := range g.Acked {
		if !got[a.Seq] {
			n++
		}
	}
	return n
}

// Snapshot copies every registration's history.
func (l *DeliveryLog) Snapshot() []RegLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]RegLog, len(l.regs))
	for i, g := range l.regs {
		out[i] = *g
		out[i].Acked = slices.Clone(g.Acked)
		out[i].Streams = slices.Clone(g.Streams)
		out[i].Got = slices.Clone(g.Got)
	}
	return out
}

// ops is how many events were sent and received.
func (l *DeliveryLog) ops() int {
	n := 0
	for _, g := range l.Snapshot() {
		n += int(g.Sent) + len(g.Got)
	}
	return n
}

// CheckDeliveries judges each registration's deliveries. The rules:
//
//   - Isolation (DESIGN §7, every resource belongs to a principal): an
//     event reaches only the listener of the registration it was sent to —
//     never another principal's, never another registration's.
//   - No loss (the standards: nothing acknowledged is lost across kill -9,
//     restart or failover): every event whose Notify the mailbox answered
//     is received, unless the registration ended.
//   - Order without gaps: the mailbox numbers a registration's stored
//     events 1, 2, 3…; a stream delivers them in that order, each index
//     after the one before it, and a new stream begins at most one past the
//     highest index received before; an index always carries the same
//     event; along the indexes, sequence numbers never fall (the generator
//     sends them rising, each until answered).
//   - Redelivery only of unacknowledged events: the mailbox may deliver an
//     event again after a stream ended (EM "Event delivery guarantees": an
//     indefinite failure calls for redelivery; delivery is at least once),
//     but a new stream resumes after the last acknowledgement it recorded,
//     so no event at or below an index the mailbox reported as recorded
//     before the stream opened comes again.
func CheckDeliveries(regs []RegLog) []string {
	var v []string
	for i := range regs {
		v = append(v, checkReg(&regs[i])...)
	}
	return v
}

func checkReg(g *RegLog) []string {
	var v []string
	bad := func(d Delivered, format string, args ...any) {
		v = append(v, fmt.Sprintf("registration %s (%s), event seq %d, index %d, stream %d, phase %q: %s",
			g.Name, g.Principal, d.Seq, d.Index, d.Stream, d.Phase, fmt.Sprintf(format, args...)))
	}
	seqAt := map[uint64]Delivered{}
	var top uint64 // the highest index received
	prev := Delivered{Stream: -1}
	for _, d := range g.Got {
		switch {
		case d.Principal != g.Principal:
			bad(d, "the event of registration %s of principal %s reached another principal's listener", d.From, d.Principal)
		case d.From != g.Name:
			bad(d, "the event of registration %s reached another registration's listener", d.From)
		case d.Seq < 1 || d.Seq > g.Sent:
			bad(d, "never sent (highest sent %d)", g.Sent)
		}
		if s, ok := seqAt[d.Index]; ok && s.Seq != d.Seq {
			bad(d, "index %d carried seq %d before", d.Index, s.Seq)
		}
		switch {
		case d.Stream != prev.Stream && d.Stream < len(g.Streams) && d.Index <= g.Streams[d.Stream]:
			bad(d, "delivered again though the mailbox had recorded its acknowledgement (through index %d) before the stream opened", g.Streams[d.Stream])
		case d.Stream != prev.Stream && d.Index > top+1:
			bad(d, "gap: the stream began past index %d, the highest received before", top)
		case d.Stream == prev.Stream && d.Index <= prev.Index:
			bad(d, "out of order: after index %d (seq %d) on the same stream", prev.Index, prev.Seq)
		case d.Stream == prev.Stream && d.Index > prev.Index+1:
			bad(d, "gap: indexes %d..%d skipped on the stream", prev.Index+1, d.Index-1)
		}
		seqAt[d.Index] = d
		top = max(top, d.Index)
		prev = d
	}
	v = append(v, checkSeqOrder(g, seqAt)...)
	if g.Ended != "" {
		return v
	}
	got := map[int64]bool{}
	for _, d := range g.Got {
		got[d.Seq] = true
	}
	for _, a := range g.Acked {
		if !got[a.Seq] {
			v = append(v, fmt.Sprintf("registration %s (%s), event seq %d, phase %q: stored (Notify answered) but never delivered; the registration lives",
				g.Name, g.Principal, a.Seq, a.Phase))
		}
	}
	return v
}

// checkSeqOrder checks that sequence numbers never fall along the
// indexes: an event stored after another was sent after it.
func checkSeqOrder(g *RegLog, seqAt map[uint64]Delivered) []string {
	idx := make([]uint64, 0, len(seqAt))
	for i := range seqAt {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var v []string
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		if x, y := seqAt[a], seqAt[b]; y.Seq < x.Seq {
			v = append(v, fmt.Sprintf("registration %s (%s), event seq %d, index %d, phase %q: reordered, stored after seq %d (index %d)",
				g.Name, g.Principal, y.Seq, b, y.Phase, x.Seq, a))
		}
	}
	return v
}
