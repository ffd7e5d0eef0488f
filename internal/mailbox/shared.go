package mailbox

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"github.com/djinn-go/djinn"
)

// A shared delivery stream carries several registrations of one caller:
// each is served exactly as a stream of its own would be (the MailboxPull
// command when it joins, its own window, acknowledgements recorded in
// the term's rounds, at least once), and one sender packs the parts that
// are ready, of every registration, into each message. A client with many
// registrations then pays a message (and an acknowledgement) per round of
// stored events, not per event. A registration that fails leaves the
// stream with its error; only the stream's own failure (its client gone,
// the term over) ends it.

// MaxSharedRegistrations bounds the registrations on one shared stream.
const MaxSharedRegistrations = 65536

// SharedJoin is a registration joining a shared stream.
type SharedJoin struct {
	ID djinn.ID
	// After and Window as a stream of its own takes them (MaxBatch is the
	// shared stream's).
	After  uint64
	Window int
	// Ack acknowledges the events through it as the registration joins.
	Ack uint64
}

// SharedAck acknowledges a registration's events through an index.
type SharedAck struct {
	ID      djinn.ID
	Through uint64
}

// SharedRequest is what one message of the client asks.
type SharedRequest struct {
	Add    []SharedJoin
	Acks   []SharedAck
	Remove []djinn.ID // leave once the acknowledgements are recorded
}

// SharedPart is one registration's part of a message to the client:
// events, the index through which acknowledgements are recorded (0: no
// news), or its leaving the stream (Ended; Err says why, nil when it was
// removed with its acknowledgements recorded).
type SharedPart struct {
	ID       djinn.ID
	Events   []Stored
	Recorded uint64
	Ended    bool
	Err      error
}

// SharedConn is a shared delivery stream's transport. Recv returns io.EOF
// once the client has said all it will. Recv is called from one goroutine
// and Send from another.
type SharedConn interface {
	Recv() (SharedRequest, error)
	// Send is done with parts when it returns.
	Send(parts []SharedPart) error
}

// SharedDeliveries serves a shared delivery stream whose messages carry
// at most maxBatch events (0: DefaultStreamBatch), until ctx ends, the
// client ends its side and every registration has left (nil), or this node
// stops leading (Unavailable). A bad request (a registration added twice,
// too many) ends it with InvalidArgument; a registration's own failure
// (NoSuchObject for one that ended or is not the caller's,
// InvalidIterator, a bad acknowledgement) ends only that registration.
func (s *Service) SharedDeliveries(ctx context.Context, maxBatch int, conn SharedConn) error {
	open := StreamOpen{MaxBatch: maxBatch}
	if err := open.check(); err != nil {
		return err
	}
	if err := s.leading(); err != nil {
		return err
	}
	term := s.current.Load()
	if term == nil {
		return djinn.Errorf(djinn.Unavailable, "mailbox not ready: leadership starting; open the stream again")
	}
	s.Streams.Add(1)
	defer s.Streams.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	sh := &shared{svc: s, ctx: ctx, term: term, maxBatch: open.MaxBatch,
		subs: map[djinn.ID]*member{}, wake: make(chan struct{}, 1)}
	go sh.receive(conn)
	err := sh.send(ctx, conn)
	cancel()
	sh.members.Wait()
	return err
}

// shared is one shared delivery stream's state.
type shared struct {
	svc      *Service
	ctx      context.Context
	term     *deliverer
	maxBatch int
	wake     chan struct{} // signalled when out grows or the stream fails
	members  sync.WaitGroup

	mu sync.Mutex
	// The fields below are guarded by mu.
	subs    map[djinn.ID]*member // the registrations on the stream
	out     []SharedPart         // what to send, in order
	events  []Stored             // the events of out's parts
	closing bool                 // the client has ended its side
	err     error                // why the stream must end
}

// member is a registration on a shared stream. Until it is open (its
// MailboxPull applied and the registration found the caller's), what the
// client asks of it waits in early and leave: nothing of a registration
// not the caller's is ever recorded.
type member struct {
	st    *stream // set when open
	early uint64  // the highest acknowledgement received before open
	leave bool    // removed before open
}

// receive takes the client's requests until the stream ends.
func (sh *shared) receive(conn SharedConn) {
	for {
		req, err := conn.Recv()
		if err == nil {
			err = sh.take(req)
		}
		if errors.Is(err, io.EOF) {
			sh.closeAll()
			return
		}
		if err != nil {
			sh.fail(err)
			return
		}
	}
}

func (sh *shared) take(req SharedRequest) error {
	for _, j := range req.Add {
		if err := sh.add(j); err != nil {
			return err
		}
	}
	for _, a := range req.Acks {
		sh.ack(a.ID, a.Through, nil)
	}
	for _, id := range req.Remove {
		sh.ack(id, 0, io.EOF)
	}
	return nil
}

// add puts a registration on the stream and opens it.
func (sh *shared) add(j SharedJoin) error {
	open := StreamOpen{After: j.After, Window: j.Window, MaxBatch: sh.maxBatch}
	if err := open.check(); err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.subs[j.ID]; ok {
		return djinn.Errorf(djinn.InvalidArgument, "registration %s: already on this delivery stream; add it again after its ended message", j.ID)
	}
	if len(sh.subs) >= MaxSharedRegistrations {
		return djinn.Errorf(djinn.InvalidArgument, "registration %s: the delivery stream already carries %d registrations, the most it may; open another stream", j.ID, len(sh.subs))
	}
	m := &member{early: j.Ack}
	sh.subs[j.ID] = m
	sh.members.Add(1)
	go sh.run(j.ID, m, open)
	return nil
}

// ack hands an acknowledgement (or, with io.EOF, a removal) to a
// registration on the stream; one that has left is ignored.
func (sh *shared) ack(id djinn.ID, through uint64, end error) {
	sh.mu.Lock()
	m := sh.subs[id]
	if m == nil {
		sh.mu.Unlock()
		return
	}
	if m.st == nil {
		m.early = max(m.early, through)
		m.leave = m.leave || end != nil
		sh.mu.Unlock()
		return
	}
	st := m.st
	sh.mu.Unlock()
	_ = st.received(through, end) // a failure ends the registration's serve
}

// closeAll has every registration leave once its acknowledgements are
// recorded: the client ended its side.
func (sh *shared) closeAll() {
	sh.mu.Lock()
	sh.closing = true
	var open []*stream
	for _, m := range sh.subs {
		if m.st == nil {
			m.leave = true
		} else {
			open = append(open, m.st)
		}
	}
	sh.mu.Unlock()
	for _, st := range open {
		_ = st.received(0, io.EOF)
	}
	signal(sh.wake)
}

func (sh *shared) fail(err error) {
	sh.mu.Lock()
	if sh.err == nil {
		sh.err = err
	}
	sh.mu.Unlock()
	signal(sh.wake)
}

// run serves one registration of the stream until it leaves, then tells
// the client so.
func (sh *shared) run(id djinn.ID, m *member, open StreamOpen) {
	defer sh.members.Done()
	err := sh.serveMember(id, m, open)
	sh.mu.Lock()
	delete(sh.subs, id)
	sh.out = append(sh.out, SharedPart{ID: id, Ended: true, Err: err})
	sh.mu.Unlock()
	signal(sh.wake)
}

func (sh *shared) serveMember(id djinn.ID, m *member, open StreamOpen) error {
	st, err := sh.svc.openStream(sh.ctx, id, open)
	if err != nil {
		return err
	}
	defer st.stopTelling()
	if st.term != sh.term {
		err := termEnded()
		sh.fail(err)
		return err
	}
	sh.mu.Lock()
	m.st = st
	early, leave := m.early, m.leave
	sh.mu.Unlock()
	// Errors end the registration's serve, which returns them.
	_ = st.received(early, nil)
	if leave {
		_ = st.received(0, io.EOF)
	}
	return st.serve(sh.ctx, memberConn{sh: sh, id: id}, sh.term.ended)
}

// memberConn queues a registration's parts for the stream's sender.
type memberConn struct {
	sh *shared
	id djinn.ID
}

func (c memberConn) Send(events []Stored, recorded uint64) error {
	sh := c.sh
	sh.mu.Lock()
	if err := sh.err; err != nil {
		sh.mu.Unlock()
		return err
	}
	// The registration reuses events once Send returns: out keeps a copy.
	var kept []Stored
	if len(events) > 0 {
		start := len(sh.events)
		sh.events = append(sh.events, events...)
		kept = sh.events[start:len(sh.events):len(sh.events)]
	}
	sh.out = append(sh.out, SharedPart{ID: c.id, Events: kept, Recorded: recorded})
	sh.mu.Unlock()
	signal(sh.wake)
	return nil
}

// send sends what the registrations queue, packed into messages of at
// most maxBatch events, until the stream ends.
func (sh *shared) send(ctx context.Context, conn SharedConn) error {
	var spare []SharedPart
	var spareEvents []Stored
	for {
		sh.mu.Lock()
		out, events, err, done := sh.out, sh.events, sh.err, sh.closing && len(sh.subs) == 0
		if len(out) > 0 {
			// The registrations queue into the other slices meanwhile.
			sh.out, sh.events = spare[:0], spareEvents[:0]
		}
		sh.mu.Unlock()
		if err != nil {
			return err
		}
		if len(out) > 0 {
			if err := sh.sendParts(conn, out); err != nil {
				return err
			}
			clear(out)
			clear(events)
			spare, spareEvents = out, events
			continue
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sh.term.ended:
			return termEnded()
		case <-sh.wake:
			// Let the other registrations woken by the same stored round
			// queue their parts, to share this message.
			runtime.Gosched()
		}
	}
}

func (sh *shared) sendParts(conn SharedConn, parts []SharedPart) error {
	start, events := 0, 0
	for i, p := range parts {
		if events > 0 && events+len(p.Events) > sh.maxBatch {
			if err := conn.Send(parts[start:i]); err != nil {
				return err
			}
			start, events = i, 0
		}
		events += len(p.Events)
	}
	return conn.Send(parts[start:])
}
