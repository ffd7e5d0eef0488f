package mailbox

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Delivery streams (EventMailbox/Deliveries) are pull mode with the
// acknowledgements on the stream itself: the client holds one stream open
// for its registration, the mailbox sends the stored events in arrival
// order and then each new one as it is stored, and the client acknowledges
// up to an index whenever it likes. The mailbox records the
// acknowledgements in the log (one command at a time per stream, each
// covering every acknowledgement that arrived meanwhile), forgets those
// events, and tells the client how far it has recorded. At most a window
// of events is sent and not yet acknowledged, so a slow client holds back
// only its own stream.
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
	if _, _, err := s.live(ctx, id); err != nil {
		return err
	}
	term := s.current.Load()
	if term == nil {
		return djinn.Errorf(djinn.Unavailable, "mailbox not ready: leadership starting; open the stream again")
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: id[:]}}})
	if err != nil {
		return err
	}
	begun := res.(PullBegun)
	if err := wait(ctx, begun.Done); err != nil {
		return err
	}
	s.Streams.Add(1)
	defer s.Streams.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &stream{svc: s, id: id, pull: begun.Pull, open: open, sent: open.After,
		wake: make(chan struct{}, 1), acked: make(chan struct{}, 1)}
	// The receiver ends with the stream, which ends when this returns.
	go st.receive(conn)
	go st.record(ctx)
	return st.serve(ctx, conn, term.ended)
}

// stream is one delivery stream's state.
type stream struct {
	svc  *Service
	id   djinn.ID
	pull uint64
	open StreamOpen
	// wake is signalled when the client acknowledges, an acknowledgement
	// is recorded, or the stream fails; acked when there is an
	// acknowledgement to record.
	wake, acked chan struct{}

	mu sync.Mutex
	// sent, asked, recorded, closing and err are guarded by mu.
	sent     uint64 // the last index sent (or After)
	asked    uint64 // the highest acknowledgement received
	recorded uint64 // the highest acknowledgement recorded in the log
	closing  bool   // the client has ended its side
	err      error  // why the stream must end
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
		st.mu.Lock()
		switch {
		case errors.Is(err, io.EOF):
			st.closing = true
		case err != nil:
			st.failLocked(err)
		case ack > st.sent:
			err = djinn.Errorf(djinn.InvalidArgument, "ack_through %d: past the last event sent on this stream (%d); acknowledge only events received", ack, st.sent)
			st.failLocked(err)
		case ack > st.asked:
			st.asked = ack
			signal(st.acked)
		}
		st.mu.Unlock()
		signal(st.wake)
		if err != nil {
			return
		}
	}
}

func (st *stream) failLocked(err error) {
	if st.err == nil {
		st.err = err
	}
}

// record records acknowledgements in the log, one command at a time, each
// through the highest acknowledgement received by then.
func (st *stream) record(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.acked:
		}
		st.mu.Lock()
		through, done := st.asked, st.recorded
		st.mu.Unlock()
		if through <= done {
			continue
		}
		_, err := st.svc.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{
			Entries: []*statepb.Delivered{{RegistrationId: st.id[:], ThroughIndex: through}},
		}}})
		st.mu.Lock()
		if err != nil {
			st.failLocked(err)
		} else {
			st.recorded = max(st.recorded, through)
		}
		st.mu.Unlock()
		signal(st.wake)
		if err != nil {
			return
		}
	}
}

// serve sends events and recorded acknowledgements until the stream ends.
func (st *stream) serve(ctx context.Context, conn StreamConn, ended <-chan struct{}) error {
	var told uint64 // the recorded acknowledgement the client was told of
	for {
		st.mu.Lock()
		sent, asked, recorded, closing, err := st.sent, st.asked, st.recorded, st.closing, st.err
		st.mu.Unlock()
		if err != nil {
			return err
		}
		if _, _, err := st.svc.live(ctx, st.id); err != nil {
			return err
		}
		room := 0
		if !closing {
			// Events through After count as acknowledged for the window.
			room = min(st.open.Window-int(sent-max(asked, st.open.After)), st.open.MaxBatch)
		}
		events, more, err := st.svc.state.After(st.id, st.pull, sent, room)
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
				st.mu.Unlock()
			}
			if err := conn.Send(events, tell); err != nil {
				return err
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
			return djinn.Errorf(djinn.Unavailable, "mailbox leadership moved; open the stream again (events not acknowledged come again)")
		case <-more:
		case <-st.wake:
		}
	}
}
