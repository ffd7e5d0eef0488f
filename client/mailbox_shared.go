package client

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The delivery streams of a client's registrations share one gRPC stream
// per connection (the shared form of the mailbox's Deliveries): each
// registration joins it with its own position and window, the mailbox
// packs the ready events of several registrations into one message, and
// the acknowledgements of several go back in one. A DeliveryStream on it
// behaves as one of its own: the same order, acknowledgements, errors and
// at-least-once delivery. The shared stream lives while a registration is
// on it. A registration already on it (a second stream of the same
// registration, or one still leaving) gets a stream of its own, as does a
// stream asked for with DeliveryBatch or DeliveryOwnStream; so does every
// stream of a connection whose server does not serve the shared form.

// maxSharedMembers is the mailbox's bound on the registrations of one
// shared stream; past it, streams are opened alone.
const maxSharedMembers = 65536

var sharedStreams = struct {
	sync.Mutex
	m map[*grpc.ClientConn]*deliveryMux // nil value: the server serves no shared form
}{m: map[*grpc.ClientConn]*deliveryMux{}}

// deliveryMux is a connection's shared delivery stream.
type deliveryMux struct {
	cc  *grpc.ClientConn
	c   Connector
	ref djinn.Ref // the mailbox, whose cluster learns of a moved leader
	// stream is set by run before the loops that use it start.
	stream djinnpb.EventMailbox_DeliveriesClient
	cancel context.CancelFunc
	kick   chan struct{} // signalled when there is something to send

	mu sync.Mutex
	// The fields below are guarded by mu.
	members map[djinn.ID]*sharedMember // joined and not yet told ended
	adds    []*djinnpb.DeliveryCursor
	acks    map[djinn.ID]uint64
	removes [][]byte
	replied bool  // a message came: the server serves the shared form
	err     error // the stream is over
}

// sharedMember is one registration on a shared stream.
type sharedMember struct {
	x     *deliveryMux
	id    djinn.ID
	ready chan struct{} // signalled when queue grows or the member ends

	mu sync.Mutex
	// The fields below are guarded by mu.
	queue []*djinnpb.RegistrationDeliveries
	ended bool  // nothing more comes
	err   error // why it ended (nil: removed, acknowledgements recorded)
	left  bool  // its DeliveryStream is done with it: drop what comes
}

// joinShared puts registration id on cc's shared stream, opening the
// stream if there is none; it returns nil when the registration's stream
// is to be opened alone.
func joinShared(c Connector, ref djinn.Ref, cc *grpc.ClientConn, id djinn.ID, cfg deliveryConfig) *sharedMember {
	sharedStreams.Lock()
	defer sharedStreams.Unlock()
	x, ok := sharedStreams.m[cc]
	if ok && x == nil {
		return nil
	}
	if x == nil || x.over() {
		x = openMux(c, ref, cc)
		sharedStreams.m[cc] = x
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.members[id] != nil || len(x.members) >= maxSharedMembers {
		return nil
	}
	m := &sharedMember{x: x, id: id, ready: make(chan struct{}, 1)}
	x.members[id] = m
	x.adds = append(x.adds, &djinnpb.DeliveryCursor{RegistrationId: id[:], AfterIndex: cfg.after, Window: int32(cfg.window), AckThrough: cfg.ack})
	signal(x.kick)
	return m
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// openMux makes cc's shared stream; the stream itself is opened by the
// mux's own goroutine, so that no join waits for the network.
func openMux(c Connector, ref djinn.Ref, cc *grpc.ClientConn) *deliveryMux {
	ctx, cancel := context.WithCancel(context.Background())
	x := &deliveryMux{cc: cc, c: c, ref: ref, cancel: cancel, kick: make(chan struct{}, 1),
		members: map[djinn.ID]*sharedMember{}, acks: map[djinn.ID]uint64{}}
	go x.run(ctx)
	return x
}

// run opens the stream and serves it until it ends.
func (x *deliveryMux) run(ctx context.Context) {
	stream, err := djinnpb.NewEventMailboxClient(x.cc).Deliveries(ctx)
	if err != nil {
		x.fail(err)
		return
	}
	x.stream = stream
	go x.sendLoop(ctx)
	x.recvLoop()
}

func (x *deliveryMux) over() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err != nil
}

// sendLoop sends what the members queued, gathered into one message:
// the stream's first message (which names no registration: the shared
// form), then adds, acknowledgements and removals as they come.
func (x *deliveryMux) sendLoop(ctx context.Context) {
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.kick:
		}
		// Let the other members' acknowledgements of the same round come.
		runtime.Gosched()
		x.mu.Lock()
		req := &djinnpb.DeliveriesRequest{Add: x.adds, Remove: x.removes}
		for id, through := range x.acks {
			req.Acks = append(req.Acks, &djinnpb.DeliveryCursor{RegistrationId: id[:], AckThrough: through})
		}
		x.adds, x.removes = nil, nil
		clear(x.acks)
		x.mu.Unlock()
		if !first && len(req.Add)+len(req.Acks)+len(req.Remove) == 0 {
			continue
		}
		first = false
		if err := x.stream.Send(req); err != nil {
			if !errors.Is(err, io.EOF) { // at io.EOF, Recv has the stream's status
				x.fail(err)
			}
			return
		}
	}
}

// recvLoop hands each registration its parts until the stream fails, and
// ends the stream when its last registration has left.
func (x *deliveryMux) recvLoop() {
	for {
		msg, err := x.stream.Recv()
		if err != nil {
			x.fail(x.failure(err))
			return
		}
		x.mu.Lock()
		x.replied = true
		x.mu.Unlock()
		for _, rd := range msg.GetRegistrations() {
			if !x.hand(rd) {
				x.closeIdle()
			}
		}
	}
}

// hand gives a part to its registration; false when no registration is
// left on the stream.
func (x *deliveryMux) hand(rd *djinnpb.RegistrationDeliveries) bool {
	id, err := djinn.IDFromBytes("registration id", rd.GetRegistrationId())
	if err != nil {
		return true // not one of ours: nothing to hand
	}
	x.mu.Lock()
	m := x.members[id]
	if rd.GetEnded() {
		delete(x.members, id)
	}
	left := len(x.members) > 0 || len(x.adds) > 0
	x.mu.Unlock()
	if m != nil {
		m.push(rd)
	}
	return left
}

// failure is the error the members of a failed stream see; a server that
// moved its leadership names the new leader, and the next stream goes
// there. A server that refused the shared form before any reply serves
// none: its streams are opened alone from now on.
func (x *deliveryMux) failure(err error) error {
	if leader := leaderOf(x.stream.Trailer()); leader != "" {
		noteLeader(x.c, x.ref, leader)
	}
	x.mu.Lock()
	replied := x.replied
	x.mu.Unlock()
	if !replied && (djinn.KindOf(err) == djinn.InvalidArgument || djinn.KindOf(err) == djinn.Unsupported) {
		sharedStreams.Lock()
		sharedStreams.m[x.cc] = nil
		sharedStreams.Unlock()
		return djinn.Errorf(djinn.Unavailable, "delivery stream: the mailbox serves no shared streams (%v); open the stream again, alone", err)
	}
	if errors.Is(err, io.EOF) {
		return djinn.Errorf(djinn.Unavailable, "delivery stream: the mailbox ended the shared stream; open the stream again")
	}
	return err
}

// fail ends the stream: every registration on it ends with err.
func (x *deliveryMux) fail(err error) {
	sharedStreams.Lock()
	if sharedStreams.m[x.cc] == x {
		delete(sharedStreams.m, x.cc)
	}
	sharedStreams.Unlock()
	x.mu.Lock()
	if x.err == nil {
		x.err = err
	}
	members := x.members
	x.members = map[djinn.ID]*sharedMember{}
	x.mu.Unlock()
	x.cancel()
	for _, m := range members {
		m.end(err)
	}
}

// closeIdle ends the stream if no registration is on it or joining.
func (x *deliveryMux) closeIdle() {
	sharedStreams.Lock()
	defer sharedStreams.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.members) > 0 || len(x.adds) > 0 || x.err != nil {
		return
	}
	x.err = djinn.Errorf(djinn.Unavailable, "delivery stream: closed with its last registration")
	if sharedStreams.m[x.cc] == x {
		delete(sharedStreams.m, x.cc)
	}
	x.cancel()
}

// ack queues an acknowledgement (or, with through 0 and remove set, the
// registration's leaving).
func (x *deliveryMux) ack(m *sharedMember, through uint64, remove bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.members[m.id] != m {
		return djinn.Errorf(djinn.Unavailable, "delivery stream: ended; Recv tells why")
	}
	if remove {
		x.removes = append(x.removes, m.id[:])
	} else if through > x.acks[m.id] {
		x.acks[m.id] = through
	}
	signal(x.kick)
	return nil
}

func (m *sharedMember) push(rd *djinnpb.RegistrationDeliveries) {
	m.mu.Lock()
	if !m.left {
		m.queue = append(m.queue, rd)
	}
	if rd.GetEnded() {
		m.ended, m.err = true, errorFromProto(rd.GetError())
	}
	m.mu.Unlock()
	signal(m.ready)
}

func (m *sharedMember) end(err error) {
	m.mu.Lock()
	if !m.ended {
		m.ended, m.err = true, err
	}
	m.mu.Unlock()
	signal(m.ready)
}

// next returns the registration's next part, waiting for it; at the end,
// io.EOF after a removal, or why it ended.
func (m *sharedMember) next(ctx context.Context) (*djinnpb.RegistrationDeliveries, error) {
	for {
		m.mu.Lock()
		if len(m.queue) > 0 {
			rd := m.queue[0]
			m.queue[0] = nil
			m.queue = m.queue[1:]
			m.mu.Unlock()
			if rd.GetEnded() {
				continue // the end is told once the parts before it are
			}
			return rd, nil
		}
		ended, err := m.ended, m.err
		m.mu.Unlock()
		if ended {
			if err == nil {
				return nil, io.EOF
			}
			return nil, err
		}
		select {
		case <-m.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// leave takes the registration off the stream without waiting: what
// comes for it is dropped.
func (m *sharedMember) leave() {
	m.mu.Lock()
	left := m.left || m.ended
	m.left, m.queue = true, nil
	m.mu.Unlock()
	if !left {
		_ = m.x.ack(m, 0, true)
	}
}
