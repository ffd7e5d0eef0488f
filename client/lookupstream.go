package client

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LookupStream looks up items over one long-lived stream to a lookup
// service: Lookup and LookupN as on a Registrar, without the cost of a
// call each. It suits clients that look up often, and is made to be
// shared: lookups from many goroutines that wait at the same time go to
// the service together, as one batch answered by one message (or, when
// the answers are large, by several of about a MiB each, each lookup
// returning as its answer comes), so a busy stream pays the per-message
// cost once per batch rather than once per lookup. A lookup alone goes at
// once. Each lookup has its own context: one given up returns at once, and
// the stream goes on. An answer larger than a message may carry (4 MiB
// less 64 KiB: what a client receives by default) fails that lookup,
// djinn.ErrResourceExhausted naming its size and how many matches fit, as
// Registrar.LookupN does; ask for fewer matches.
//
// The stream mends itself. When the server ends it or the connection
// breaks (an Unavailable failure: the server went away, or is no longer
// the leader), the batch in flight is sent again, once, on a new stream —
// to the leader the server named, if it named one (lookups are reads, so
// sending one twice is harmless). Lookups fail only when that new stream
// cannot be had or fails too; the next lookup tries again. Any other
// failure (a broken answer) ends the stream: every waiting and later
// lookup fails, and the caller opens another. Close it when done.
type LookupStream struct {
	reg    *Registrar
	ctx    context.Context // the stream's life: Stream's ctx, ended by Close
	cancel context.CancelFunc
	wake   chan struct{} // holds a token while lookups are queued
	done   chan struct{} // closed when run returns

	// run's alone:
	endpoint string                                   // where the stream goes
	stream   djinnpb.LookupService_LookupStreamClient // nil after a failure, until the next batch
	end      context.CancelFunc                       // ends stream

	mu     sync.Mutex
	queue  []*streamLookup // waiting for the next batch
	err    error           // once set, the stream is done
	queued func(n int)     // tests: called with the queue's length after a lookup joins it
}

// streamLookup is one lookup on a LookupStream: its request, then, once
// done is closed, its answer or err.
type streamLookup struct {
	req  *djinnpb.LookupRequest
	ans  *djinnpb.EncodedLookupAnswer
	err  error
	done chan struct{}
}

// maxLookupBatch is the most lookups a batch carries (the service's
// limit).
const maxLookupBatch = 1024

// Stream opens a lookup stream to the lookup service. It lasts until
// Close, or until ctx ends.
func (r *Registrar) Stream(ctx context.Context) (*LookupStream, error) {
	if _, err := r.conn(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &LookupStream{reg: r, ctx: sctx, cancel: cancel, endpoint: r.ref.Endpoint,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := s.open(); err != nil {
		cancel()
		return nil, err
	}
	go s.run()
	return s, nil
}

// open starts a stream to s.endpoint (to the leader of its cluster, when
// the connector follows it).
func (s *LookupStream) open() error {
	cc, err := ConnFor(s.reg.c, djinn.Ref{Endpoint: s.endpoint, Service: s.reg.ref.Service})
	if err != nil {
		return err
	}
	ctx, end := context.WithCancel(s.ctx)
	stream, err := djinnpb.NewLookupServiceClient(cc).LookupStream(ctx)
	if err != nil {
		end()
		return err
	}
	s.stream, s.end = stream, end
	return nil
}

// drop ends the current stream, if any.
func (s *LookupStream) drop() {
	if s.stream != nil {
		s.end()
		s.stream, s.end = nil, nil
	}
}

// lookup queues req for the next batch and waits for its answer, or until
// ctx ends: a lookup given up before its batch went is not sent, and the
// answer to one given up later is dropped.
func (s *LookupStream) lookup(ctx context.Context, req *djinnpb.LookupRequest) (*djinnpb.EncodedLookupAnswer, error) {
	if s == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup stream: missing (nil)")
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	l := &streamLookup{req: req, done: make(chan struct{})}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	s.queue = append(s.queue, l)
	n, queued := len(s.queue), s.queued
	s.mu.Unlock()
	if queued != nil {
		queued(n)
	}
	select {
	case s.wake <- struct{}{}:
	default: // run is already woken
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.queue, l); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
		}
		s.mu.Unlock()
		return nil, ctxError(ctx)
	}
	if l.err != nil {
		return nil, l.err
	}
	if e := l.ans.GetError(); e != nil {
		return nil, errorFromProto(e)
	}
	return l.ans, nil
}

// ctxError is the error of a call whose ctx ended, as a unary call would
// return it: context.Canceled or DeadlineExceeded, of kind Unavailable.
func ctxError(ctx context.Context) error {
	return fromRPC(status.FromContextError(ctx.Err()).Err())
}

// run sends the queued lookups, as one batch at a time, and hands each
// its answer, until the stream fails for good or its context ends.
func (s *LookupStream) run() {
	defer close(s.done)
	defer s.drop()
	for {
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			s.fail(s.stopped())
			return
		}
		s.mu.Lock()
		batch := s.queue[:min(len(s.queue), maxLookupBatch)]
		s.queue = s.queue[len(batch):]
		if len(s.queue) > 0 {
			select {
			case s.wake <- struct{}{}: // more than a batch waits: go round again
			default:
			}
		}
		s.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		unanswered, err := s.send(batch)
		if err == nil {
			continue
		}
		if s.ctx.Err() != nil {
			err = s.stopped()
		}
		for _, l := range unanswered {
			l.err = err
			close(l.done)
		}
		if s.ctx.Err() != nil || !errors.Is(err, djinn.ErrUnavailable) {
			s.fail(err)
			return
		}
	}
}

// stopped is why the stream stopped: Close's error, or its context's.
func (s *LookupStream) stopped() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return ctxError(s.ctx)
}

// send gets batch its answers: on the stream, or on a new one when there
// is none (after an earlier failure). A stream that was there before this
// batch may have broken since (its server gone, or no longer the leader):
// then one new stream gets the lookups not yet answered again. On failure
// it returns those, which the caller fails.
func (s *LookupStream) send(batch []*streamLookup) ([]*streamLookup, error) {
	for {
		fresh := s.stream == nil
		if fresh {
			if err := s.open(); err != nil {
				return batch, fromRPC(err)
			}
		}
		answered, leader, err := s.roundTrip(batch)
		batch = batch[answered:]
		if err == nil {
			return nil, nil
		}
		s.drop()
		if leader != "" {
			s.endpoint = leader // the next stream goes there
			noteLeader(s.reg.c, s.reg.ref, leader)
		}
		if fresh || !errors.Is(err, djinn.ErrUnavailable) || s.ctx.Err() != nil {
			return batch, err
		}
	}
}

// roundTrip sends batch and gives each lookup its answer as it comes: the
// service answers a batch in order, in one response or more. It returns
// how many lookups, from the first, have their answers; when the stream
// fails, the error and the leader the server named, if any.
func (s *LookupStream) roundTrip(batch []*streamLookup) (answered int, leader string, err error) {
	reqs := make([]*djinnpb.LookupRequest, len(batch))
	for i, l := range batch {
		reqs[i] = l.req
	}
	if err := s.stream.Send(&djinnpb.LookupBatch{Lookups: reqs}); err != nil {
		leader, err := s.ended(err)
		return 0, leader, err
	}
	for answered < len(batch) {
		// The answers' items are read as the bytes they are on the wire
		// (EncodedLookupBatchResponse is LookupBatchResponse so read) and
		// decoded by service.DecodeItem, without proto's messages in
		// between.
		resp := &djinnpb.EncodedLookupBatchResponse{}
		if err := s.stream.RecvMsg(resp); err != nil {
			leader, err := s.ended(err)
			return answered, leader, err
		}
		answers := resp.GetAnswers()
		if len(answers) == 0 || len(answers) > len(batch)-answered {
			return answered, "", djinn.Errorf(djinn.Internal, "lookup stream: a response of %d answers to a batch of %d lookups, %d of them answered before", len(answers), len(batch), answered)
		}
		for _, a := range answers {
			l := batch[answered]
			l.ans = a
			close(l.done)
			answered++
		}
	}
	return answered, "", nil
}

// ended returns the error a failed Send or Recv means, and the leader the
// server named in its trailer, if any. A Send that fails with io.EOF means
// the server ended the stream, and Recv has its status.
func (s *LookupStream) ended(err error) (leader string, _ error) {
	if errors.Is(err, io.EOF) {
		if _, e := s.stream.Recv(); e != nil && !errors.Is(e, io.EOF) {
			err = e
		}
	}
	leader = leaderOf(s.stream.Trailer())
	if errors.Is(err, io.EOF) {
		return leader, djinn.Errorf(djinn.Unavailable, "lookup stream: ended by the server")
	}
	return leader, fromRPC(err)
}

// fail ends the stream with err (unless it has ended already) and fails
// the queued lookups with the stream's error.
func (s *LookupStream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	queued := s.queue
	s.queue = nil
	err = s.err
	s.mu.Unlock()
	for _, l := range queued {
		l.err = err
		close(l.done)
	}
	s.cancel()
}

// Lookup returns one item matching tmpl, chosen at random among the
// matches, or nil when none does. A lookup whose ctx ends first returns
// ctx's error; the stream goes on.
func (s *LookupStream) Lookup(ctx context.Context, tmpl ServiceTemplate) (*ServiceItem, error) {
	ans, err := s.lookup(ctx, &djinnpb.LookupRequest{Template: wire.Template(tmpl), One: true})
	if err != nil || len(ans.GetItems()) == 0 {
		return nil, err
	}
	items, err := lookedUp(ans.GetItems()[:1])
	if err != nil {
		return nil, err
	}
	return &items[0], nil
}

// LookupN returns the number of items matching tmpl and up to max of them
// (0 to math.MaxInt32; a negative max is djinn.ErrInvalidArgument). A
// lookup whose ctx ends first returns ctx's error; the stream goes on.
func (s *LookupStream) LookupN(ctx context.Context, tmpl ServiceTemplate, max int) (total int, items []ServiceItem, err error) {
	if max < 0 || max > maxMatches {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must be 0 to %d", max, maxMatches)
	}
	ans, err := s.lookup(ctx, &djinnpb.LookupRequest{Template: wire.Template(tmpl), MaxMatches: int32(max)})
	if err != nil {
		return 0, nil, err
	}
	if items, err = lookedUp(ans.GetItems()); err != nil {
		return 0, nil, err
	}
	return int(ans.GetTotal()), items, nil
}

// Close ends the stream: lookups waiting and later fail. It returns once
// the stream's goroutine has.
func (s *LookupStream) Close() error {
	if s == nil {
		return nil
	}
	s.fail(djinn.Errorf(djinn.InvalidArgument, "lookup stream: closed"))
	<-s.done
	return nil
}
