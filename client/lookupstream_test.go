package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// streamService is a lookup service of the test's own that serves only
// LookupStream: for each batch it records the batch and answers it with
// answer's response, if any, then ends the stream with answer's error, if
// any.
type streamService struct {
	djinnpb.UnimplementedLookupServiceServer
	answer func(n int, batch *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error)
	// split, if set, is the most answers a response carries: a batch's
	// answers go in as many as it takes.
	split int
	// trailer, if set, goes with a stream answer ends with an error (a
	// follower's leader hint).
	trailer metadata.MD

	mu      sync.Mutex
	batches [][]int32 // each batch's max matches, in order
}

func (f *streamService) LookupStream(stream djinnpb.LookupService_LookupStreamServer) error {
	for n := 0; ; n++ {
		batch, err := stream.Recv()
		if err != nil {
			return nil
		}
		var maxes []int32
		for _, l := range batch.GetLookups() {
			maxes = append(maxes, l.GetMaxMatches())
		}
		f.mu.Lock()
		f.batches = append(f.batches, maxes)
		f.mu.Unlock()
		resp, err := f.answer(n, batch)
		for answers := resp.GetAnswers(); resp != nil; {
			part := answers
			if f.split > 0 && len(part) > f.split {
				part = part[:f.split]
			}
			if err := stream.Send(&djinnpb.LookupBatchResponse{Answers: part}); err != nil {
				return err
			}
			if answers = answers[len(part):]; len(answers) == 0 {
				break
			}
		}
		if err != nil {
			if f.trailer != nil {
				stream.SetTrailer(f.trailer)
			}
			return err
		}
	}
}

func (f *streamService) seen() [][]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

// echo answers each lookup with its max matches as the total.
func echo(batch *djinnpb.LookupBatch) *djinnpb.LookupBatchResponse {
	resp := &djinnpb.LookupBatchResponse{}
	for _, l := range batch.GetLookups() {
		resp.Answers = append(resp.Answers, &djinnpb.LookupAnswer{Total: int64(l.GetMaxMatches())})
	}
	return resp
}

// serveStream serves f on a loopback port and returns its address.
func serveStream(t *testing.T, f *streamService) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	djinnpb.RegisterLookupServiceServer(g, f)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// openStream serves f on a loopback port and opens a LookupStream to it.
func openStream(t *testing.T, f *streamService) *client.LookupStream {
	t.Helper()
	return openStreamAt(t, serveStream(t, f))
}

// openStreamAt opens a LookupStream to the lookup service at addr.
func openStreamAt(t *testing.T, addr string) *client.LookupStream {
	t.Helper()
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	ref := testRef()
	ref.Endpoint = addr
	s, err := client.NewRegistrar(pool, ref).Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// lookupMany runs LookupN(max) for each of maxes, each on its own
// goroutine, and returns a channel with each one's error (nil when the
// answer was its own: a total equal to its max).
func lookupMany(s *client.LookupStream, maxes ...int) <-chan error {
	return lookupManyCtx(context.Background(), s, maxes...)
}

// lookupManyCtx is lookupMany with the lookups' context.
func lookupManyCtx(ctx context.Context, s *client.LookupStream, maxes ...int) <-chan error {
	errs := make(chan error, len(maxes))
	for _, m := range maxes {
		go func() {
			total, _, err := s.LookupN(ctx, service.Template{}, m)
			if err == nil && total != m {
				err = fmt.Errorf("lookup %d answered with total %d: another lookup's answer", m, total)
			}
			errs <- err
		}()
	}
	return errs
}

// holdingFirst is a stream service that echoes, but holds its first batch
// until release is closed; arrived is closed when that batch comes.
func holdingFirst() (f *streamService, arrived, release chan struct{}) {
	arrived, release = make(chan struct{}), make(chan struct{})
	f = &streamService{answer: func(n int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
		if n == 0 {
			close(arrived)
			<-release
		}
		return echo(b), nil
	}}
	return f, arrived, release
}

// TestLookupStreamBatches: lookups that wait while a batch is out go
// together as the next batch, each gets its own answer, and a lookup alone
// goes at once.
func TestLookupStreamBatches(t *testing.T) {
	f, arrived, release := holdingFirst()
	s := openStream(t, f)
	first := lookupMany(s, 1)
	<-arrived // the first lookup went alone; the service holds it

	waiting := make(chan int, 16)
	client.OnLookupQueued(s, func(n int) { waiting <- n })
	const n = 10
	rest := lookupMany(s, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	for q := 0; q < n; {
		q = max(q, <-waiting)
	}
	close(release)
	for range n {
		if err := <-rest; err != nil {
			t.Error(err)
		}
	}
	if err := <-first; err != nil {
		t.Error(err)
	}
	got := f.seen()
	if len(got) != 2 || !slices.Equal(got[0], []int32{1}) || len(got[1]) != n {
		t.Fatalf("batches %v, want [1] then the %d lookups that waited", got, n)
	}
	sorted := slices.Sorted(slices.Values(got[1]))
	if !slices.Equal(sorted, []int32{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
		t.Errorf("second batch %v, want lookups 2 to 11", got[1])
	}
	if err := <-lookupMany(s, 12); err != nil {
		t.Error(err)
	}
	if got := f.seen(); len(got) != 3 || !slices.Equal(got[2], []int32{12}) {
		t.Errorf("batches %v, want a lone lookup as a batch of its own", got)
	}
}

// TestLookupStreamAnswersInParts: the service may answer a batch in
// several responses, in order (as it does when the answers are large):
// each lookup gets its own answer. A stream that ends part way through a
// batch sends the lookups not yet answered again, on a new stream, and
// those alone. Before, a batch took one response: anything else failed
// the stream.
func TestLookupStreamAnswersInParts(t *testing.T) {
	for _, tt := range []struct {
		name  string
		split int
		cut   bool // the batch of ten is cut after its first response
	}{
		{"ten answers in responses of three", 3, false},
		{"ten answers in responses of one", 1, false},
		{"the stream ends after three of ten answers", 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			arrived, release := make(chan struct{}), make(chan struct{})
			var batches atomic.Int32 // n counts a stream's batches; this, every stream's
			f := &streamService{split: tt.split, answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
				switch n := batches.Add(1) - 1; {
				case n == 0:
					close(arrived)
					<-release
				case n == 1 && tt.cut:
					return &djinnpb.LookupBatchResponse{Answers: echo(b).Answers[:tt.split]}, grpcerr.Status(djinn.Errorf(djinn.Unavailable, "going away"))
				}
				return echo(b), nil
			}}
			s := openStream(t, f)
			first := lookupMany(s, 1)
			<-arrived // the first lookup went alone; the service holds it
			waiting := make(chan int, 16)
			client.OnLookupQueued(s, func(n int) { waiting <- n })
			rest := lookupMany(s, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
			for q := 0; q < 10; {
				q = max(q, <-waiting)
			}
			close(release)
			for range 10 {
				if err := <-rest; err != nil {
					t.Error(err)
				}
			}
			if err := <-first; err != nil {
				t.Error(err)
			}
			got := f.seen()
			want := 2
			if tt.cut {
				want = 3
			}
			if len(got) != want || len(got[1]) != 10 {
				t.Fatalf("batches %v, want [1], the ten that waited%s", got, map[bool]string{true: ", and those of them not answered"}[tt.cut])
			}
			if tt.cut && !slices.Equal(got[2], got[1][tt.split:]) {
				t.Errorf("the batch sent again is %v, want the lookups not answered when the stream ended: %v", got[2], got[1][tt.split:])
			}
		})
	}
}

// TestLookupStreamContext: a lookup whose context ends returns its error at
// once and the stream goes on. Given up while queued, it is not sent; given
// up while its batch is out, its answer is dropped and the others in the
// batch have theirs. A context ended before the call sends nothing.
func TestLookupStreamContext(t *testing.T) {
	f, arrived, release := holdingFirst()
	s := openStream(t, f)
	outCtx, giveUpOut := context.WithCancel(t.Context())
	out := lookupManyCtx(outCtx, s, 1)
	<-arrived // lookup 1 went alone; the service holds it
	other := lookupMany(s, 2)
	giveUpOut()
	if err := <-out; !errors.Is(err, context.Canceled) {
		t.Errorf("lookup given up while out: %v, want context.Canceled", err)
	}

	queuedCtx, giveUpQueued := context.WithCancel(t.Context())
	waiting := make(chan int, 4)
	client.OnLookupQueued(s, func(n int) { waiting <- n })
	queued := lookupManyCtx(queuedCtx, s, 3)
	<-waiting
	giveUpQueued()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Errorf("lookup given up while queued: %v, want context.Canceled", err)
	}
	client.OnLookupQueued(s, nil)

	ended, end := context.WithCancel(t.Context())
	end()
	if _, _, err := s.LookupN(ended, service.Template{}, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("lookup on an ended context: %v, want context.Canceled", err)
	}

	close(release)
	if err := <-other; err != nil {
		t.Errorf("a lookup beside one given up: %v", err)
	}
	if err := <-lookupMany(s, 5); err != nil {
		t.Errorf("the stream after lookups given up: %v", err)
	}
	got := f.seen()
	if len(got) == 0 || !slices.Equal(got[0], []int32{1}) {
		t.Fatalf("batches %v, want lookup 1 alone first", got)
	}
	for _, b := range got {
		for _, m := range b {
			if m == 3 || m == 4 {
				t.Errorf("batches %v: lookup %d was sent though given up before its batch went", got, m)
			}
		}
	}
}

// TestLookupStreamMends: a stream the server ends (Unavailable) is
// replaced, and the batch in flight is sent again on the new one: the
// lookup succeeds; later lookups use the new stream.
func TestLookupStreamMends(t *testing.T) {
	var calls atomic.Int32
	f := &streamService{answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
		if calls.Add(1) == 1 {
			return nil, grpcerr.Status(djinn.Errorf(djinn.Unavailable, "going away"))
		}
		return echo(b), nil
	}}
	s := openStream(t, f)
	for _, m := range []int{1, 2} {
		if err := <-lookupMany(s, m); err != nil {
			t.Errorf("lookup %d: %v", m, err)
		}
	}
	if got := f.seen(); !slices.EqualFunc(got, [][]int32{{1}, {1}, {2}}, slices.Equal) {
		t.Errorf("batches %v, want lookup 1 on the stream that ended and again on the new one, then lookup 2", got)
	}
}

// TestLookupStreamFollowsLeader: a server that ends the stream naming the
// leader in its trailer (a follower) sends the stream there: the batch in
// flight and later lookups are answered by the leader.
func TestLookupStreamFollowsLeader(t *testing.T) {
	leader := &streamService{answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
		return echo(b), nil
	}}
	leaderAddr := serveStream(t, leader)
	follower := &streamService{
		answer: func(int, *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
			return nil, grpcerr.Status(djinn.Errorf(djinn.Unavailable, "not the leader"))
		},
		trailer: metadata.Pairs("djinn-leader", leaderAddr),
	}
	s := openStreamAt(t, serveStream(t, follower))
	for _, m := range []int{1, 2, 3} {
		if err := <-lookupMany(s, m); err != nil {
			t.Errorf("lookup %d: %v", m, err)
		}
	}
	if got := follower.seen(); !slices.EqualFunc(got, [][]int32{{1}}, slices.Equal) {
		t.Errorf("the follower saw batches %v, want lookup 1 only", got)
	}
	if got := leader.seen(); !slices.EqualFunc(got, [][]int32{{1}, {2}, {3}}, slices.Equal) {
		t.Errorf("the leader saw batches %v, want lookups 1, 2 and 3", got)
	}
}

// TestLookupStreamFailures: a lookup's error is its own; a response with
// the wrong number of answers ends the stream: the lookups waiting and
// every later one fail; a server that ends every stream (Unavailable)
// fails each lookup once it has had one new stream, and the next lookup
// tries again; Close fails lookups waiting.
func TestLookupStreamFailures(t *testing.T) {
	t.Run("one lookup refused", func(t *testing.T) {
		f := &streamService{answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
			resp := echo(b)
			resp.Answers[0].Error = grpcerr.ToProto(djinn.Errorf(djinn.InvalidArgument, "max matches: refused"))
			return resp, nil
		}}
		s := openStream(t, f)
		if _, _, err := s.LookupN(t.Context(), service.Template{}, 1); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("refused lookup: %v, want invalid argument", err)
		}
		if _, err := s.Lookup(t.Context(), service.Template{}); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("the stream after a refused lookup: %v, want it to go on (and refuse again)", err)
		}
	})
	t.Run("answers missing", func(t *testing.T) {
		f := &streamService{answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
			return &djinnpb.LookupBatchResponse{}, nil
		}}
		s := openStream(t, f)
		for range 2 {
			if _, _, err := s.LookupN(t.Context(), service.Template{}, 1); !errors.Is(err, djinn.ErrInternal) {
				t.Errorf("lookup answered by nothing: %v, want internal", err)
			}
		}
	})
	t.Run("stream ended", func(t *testing.T) {
		f := &streamService{answer: func(int, *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
			return nil, grpcerr.Status(djinn.Errorf(djinn.Unavailable, "not the leader"))
		}}
		s := openStream(t, f)
		for range 2 {
			if _, _, err := s.LookupN(t.Context(), service.Template{}, 1); !errors.Is(err, djinn.ErrUnavailable) {
				t.Errorf("lookup on an ended stream: %v, want unavailable", err)
			}
		}
		if got := f.seen(); len(got) != 3 {
			t.Errorf("batches %v, want 3: the first lookup on the stream and on a new one, the second on one more new one", got)
		}
	})
	t.Run("closed while waiting", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		f := &streamService{answer: func(_ int, b *djinnpb.LookupBatch) (*djinnpb.LookupBatchResponse, error) {
			<-release
			return echo(b), nil
		}}
		s := openStream(t, f)
		waiting := make(chan int, 4)
		client.OnLookupQueued(s, func(n int) { waiting <- n })
		out := lookupMany(s, 1)
		<-waiting
		queued := lookupMany(s, 2)
		<-waiting
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for _, errs := range []<-chan error{out, queued} {
			if err := <-errs; err == nil {
				t.Error("a lookup waiting when the stream closed succeeded")
			}
		}
		if _, err := s.Lookup(t.Context(), service.Template{}); err == nil {
			t.Error("a lookup after Close succeeded")
		}
	})
}
