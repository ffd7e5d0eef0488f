package mailbox

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Delivery streams (EventMailbox/Deliveries) are pull mode with the
// acknowledgements on the stream itself: the client holds one stream open
// for its registration, the mailbox sends the stored events in arrival
// order and then each new one as it is stored, and the client acknowledges
// up to an index whenever it likes. The mailbox records the
// acknowledgements in the log (one command at a time for all the streams
// of the term and the deliveries pushed to targets, each covering every
// acknowledgement that arrived meanwhile), forgets those events, and tells
// the client how far it has recorded: with the next events it sends, or
// alone once TellDelay has passed without any (at once when the client has
// ended its side). At most a window of events is sent and not yet
// acknowledged, so a slow client holds back only its own stream.
//
// A stream is a pull consumer: it begins with the MailboxPull command, so
// it disables push delivery (and waits until the target is handed nothing
// more) and supersedes the registration's earlier stream or Pull, and
// EnableDelivery to a target supersedes it (InvalidIterator). Delivery is
// at least once: a new stream starts after the last recorded
// acknowledgement, so events received and not acknowledged come again,
// with the same index — the index tells a duplicate.

// Delivery stream bounds and defaults.
const (
	DefaultWindow      = 1024
	MaxWindow          = 65536
	DefaultStreamBatch = 256
	MaxStreamBatch     = 4096
)

// TellDelay is how long a recorded acknowledgement waits for events to
// ride with before the mailbox sends it alone (acknowledged_through): while
// events flow, telling costs no message of its own.
const TellDelay = 20 * time.Millisecond

// StreamOpen is how a delivery stream begins.
type StreamOpen struct {
	// After: send events with a larger index (0: every stored event).
	After uint64
	// Window bounds the events sent and not acknowledged (0: DefaultWindow).
	Window int
	// MaxBatch bounds the events of one Send (0: DefaultStreamBatch).
	MaxBatch int
}

func (o *StreamOpen) check() error {
	switch {
	case o.Window < 0 || o.Window > MaxWindow:
		return djinn.Errorf(djinn.InvalidArgument, "delivery window %d: must be between 1 and %d (0 for %d)", o.Window, MaxWindow, DefaultWindow)
	case o.MaxBatch < 0 || o.MaxBatch > MaxStreamBatch:
		return djinn.Errorf(djinn.InvalidArgument, "delivery batch %d: must be between 1 and %d (0 for %d)", o.MaxBatch, MaxStreamBatch, DefaultStreamBatch)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultStreamBatch
	}
	return nil
}

// StreamConn is a delivery stream's transport. Recv waits for the client's
// next acknowledgement (0: none, the message carried nothing to act on)
// and returns io.EOF once the client has said all it will; Send sends
// events and, when recorded is not 0, the index through which
// acknowledgements are recorded. Recv is called from one goroutine and
// Send from another.
type StreamConn interface {
	Recv() (ackThrough uint64, err error)
	streamSender
}

// streamSender sends a stream's events and recorded acknowledgements. It
// is done with events when Send returns.
type streamSender interface {
	Send(events []Stored, recorded uint64) error
}

// Deliveries serves one delivery stream of registration id until ctx ends,
// the client ends its side (once its acknowledgements are recorded: nil),
// the registration ends (NoSuchObject), a newer consumer supersedes the
// stream (InvalidIterator), or this node stops leading (Unavailable: the
// client opens a new stream at the next leader). An acknowledgement past
// the last event sent is InvalidArgument.
func (s *Service) Deliveries(ctx context.Context, id djinn.ID, open StreamOpen, conn StreamConn) error {
	if err := open.check(); err != nil {
		return err
	}
	st, err := s.openStream(ctx, id, open)
	if err != nil {
		return err
	}
	s.Streams.Add(1)
	defer s.Streams.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer st.stopTelling()
	// The receiver ends with the stream, which ends when this returns.
	go st.receive(conn)
	return st.serve(ctx, conn, st.term.ended)
}

// openStream makes registration id's stream the registration's consumer
// (the MailboxPull command), once the registration is found live and the
// caller's.
func (s *Service) openStream(ctx context.Context, id djinn.ID, open StreamOpen) (*stream, error) {
	in, _, err := s.live(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkAfter(id, open.After, in.Last); err != nil {
		return nil, err
	}
	term := s.current.Load()
	if term == nil {
		return nil, djinn.Errorf(djinn.Unavailable, "mailbox not ready: leadership starting; open the stream again")
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: id[:]}}})
	if err != nil {
		return nil, err
	}
	begun := res.(PullBegun)
	if err := wait(ctx, begun.Done); err != nil {
		return nil, err
	}
	return &stream{svc: s, term: term, id: id, pull: begun.Pull, open: open, sent: open.After,
		wake: make(chan struct{}, 1)}, nil
}

// stream is one delivery stream's state.
type stream struct {
	svc  *Service
	term *deliverer // records the acknowledgements
	id   djinn.ID
	pull uint64
	open StreamOpen
	// wake is signalled when an acknowledgement opens a full window, an
	// acknowledgement recorded is to be told alone, the client ends its
	// side, or the stream fails.
	wake chan struct{}
	// queued is set while the term holds the stream for its next round of
	// recording; guarded by term.mu.
	queued bool
	// The sender's goroutine alone uses lease: see stillLive.
	lease liveness

	mu sync.Mutex
	// The fields below are guarded by mu.
	sent     uint64 // the last index sent (or After)
	asked    uint64 // the highest acknowledgement received
	recorded uint64 // the highest acknowledgement recorded in the log
	full     bool   // the window was full when events were last sent
	closing  bool   // the client has ended its side
	err      error  // why the stream must end
	tell     *time.Timer
	telling  bool // tell is set to wake the stream
	stopped  bool // the stream ended: tell is not set again
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// receive takes the client's acknowledgements until the stream ends.
func (st *stream) receive(conn StreamConn) {
	for {
		ack, err := conn.Recv()
		if st.received(ack, err) != nil {
			return
		}
	}
}

// received takes one acknowledgement (or the client's end, io.EOF, or
// why its side failed), and returns why the stream must end, if it must.
func (st *stream) received(ack uint64, err error) error {
	st.mu.Lock()
	wake, record := true, false
	switch {
	case errors.Is(err, io.EOF):
		st.closing, err = true, nil
	case err != nil:
		st.failLocked(err)
	case ack > st.sent:
		err = djinn.Errorf(djinn.InvalidArgument, "ack_through %d: past the last event sent on this stream (index %d%s); the stream ends: open it again and acknowledge the index of the last event received (those not acknowledged come again)", ack, st.sent, noneYet(st.sent, "sent"))
		st.failLocked(err)
	case ack > st.asked:
		st.asked, record = ack, true
		// Only an acknowledgement that opens a full window gives the
		// sender something new to do.
		wake, st.full = st.full, false
	default:
		wake = false
	}
	closing := st.closing
	st.mu.Unlock()
	if record {
		st.term.streamAcked(st)
	}
	if wake {
		signal(st.wake)
	}
	if err == nil && closing {
		return io.EOF
	}
	return err
}

func (st *stream) failLocked(err error) {
	if st.err == nil {
		st.err = err
	}
}

// toRecord returns the acknowledgement to record, if one is not recorded.
func (st *stream) toRecord() (uint64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.asked, st.asked > st.recorded
}

// recordedThrough notes that the acknowledgements through an index are
// recorded (or why they could not be): the client is told with the next
// events, alone after TellDelay, or at once when it ended its side.
func (st *stream) recordedThrough(through uint64, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		st.failLocked(err)
		signal(st.wake)
		return
	}
	st.recorded = max(st.recorded, through)
	switch {
	case st.closing:
		signal(st.wake)
	case st.telling || st.stopped:
	case st.tell == nil:
		st.telling = true
		st.tell = time.AfterFunc(TellDelay, st.tellAlone)
	default:
		st.telling = true
		st.tell.Reset(TellDelay)
	}
}

// tellAlone wakes the sender to tell the recorded acknowledgements.
func (st *stream) tellAlone() {
	st.mu.Lock()
	st.telling = false
	st.mu.Unlock()
	signal(st.wake)
}

func (st *stream) stopTelling() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stopped = true
	if st.tell != nil {
		st.tell.Stop()
	}
}

// serve sends events and recorded acknowledgements until the stream ends.
func (st *stream) serve(ctx context.Context, conn streamSender, ended <-chan struct{}) error {
	// The end of ctx and of the term wake the stream, which then waits on
	// channels of its own alone: waiting on those every stream of a
	// connection or term shares too would have each wait lock them.
	stopCtx := context.AfterFunc(ctx, func() { signal(st.wake) })
	defer stopCtx()
	stopTerm := context.AfterFunc(st.term.endedCtx, func() { signal(st.wake) })
	defer stopTerm()
	var told uint64 // the recorded acknowledgement the client was told of
	var buf []Stored
	for {
		st.mu.Lock()
		sent, asked, recorded, closing, err := st.sent, st.asked, st.recorded, st.closing, st.err
		st.mu.Unlock()
		if err != nil {
			return err
		}
		if err := st.stillLive(ctx); err != nil {
			return err
		}
		room := 0
		if !closing {
			// Events through After count as acknowledged for the window.
			room = min(st.open.Window-int(sent-max(asked, st.open.After)), st.open.MaxBatch)
		}
		events, more, err := st.svc.state.AppendAfter(buf, st.id, st.pull, sent, room)
		if err != nil {
			return err
		}
		var tell uint64
		if recorded > told {
			tell = recorded
		}
		if len(events) > 0 || tell > 0 {
			if len(events) > 0 {
				st.mu.Lock()
				st.sent = events[len(events)-1].Index
				st.full = st.open.Window-int(st.sent-max(st.asked, st.open.After)) <= 0
				st.mu.Unlock()
			}
			if err := conn.Send(events, tell); err != nil {
				return err
			}
			if len(events) > 0 {
				// Send is done with the events: the next pass reuses
				// their slice, holding no event meanwhile.
				clear(events)
				buf = events[:0]
			}
			st.svc.StreamedEvents.Add(uint64(len(events)))
			told = max(told, tell)
			continue
		}
		if closing && recorded >= asked {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
			return termEnded()
		default:
		}
		select {
		case <-more:
		case <-st.wake:
		}
	}
}

// liveness is what a stream last found of its registration's lease: alive
// until until, with the lease table's Cuts at cuts.
type liveness struct {
	until time.Time
	cuts  uint64
}

// stillLive answers what live answers for the stream's registration (nil,
// or why the stream must end), asking the registration and its lease only
// when the lease's expiration found last has come or a lease has been cut
// since (ended or made to expire earlier). Between those the answer cannot
// change: the registration's owner is fixed, the registration ends only
// with its lease (and then After fails alike), and leadership is checked
// each time.
func (st *stream) stillLive(ctx context.Context) error {
	s := st.svc
	if err := s.leading(); err != nil {
		return err
	}
	t := s.lessor.Table()
	cuts := t.Cuts()
	if cuts == st.lease.cuts && s.now().Before(st.lease.until) {
		return nil
	}
	_, until, _, err := s.liveUntil(ctx, st.id)
	if err != nil {
		return err
	}
	st.lease = liveness{until: until, cuts: cuts}
	return nil
}

func termEnded() error {
	return djinn.Errorf(djinn.Unavailable, "mailbox leadership moved; open the stream again (events not acknowledged come again)")
}
