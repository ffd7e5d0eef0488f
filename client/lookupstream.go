package client

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LookupStream looks up items over one long-lived stream to a lookup
// service: Lookup and LookupN as on a Registrar, without the cost of a
// call each. It suits clients that look up often. It is safe for
// concurrent use; lookups on one stream are answered one at a time, in
// order, so concurrent clients do better with a stream each. A stream that
// fails (the server went away or is no longer the leader) fails every
// later lookup; open another. Close it when done.
type LookupStream struct {
	mu     sync.Mutex
	stream djinnpb.LookupService_LookupStreamClient
	cancel context.CancelFunc
	err    error // once set, the stream is done
}

// Stream opens a lookup stream to the lookup service. It lasts until
// Close, or until ctx ends.
func (r *Registrar) Stream(ctx context.Context) (*LookupStream, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := lc.LookupStream(sctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &LookupStream{stream: stream, cancel: cancel}, nil
}

// lookup sends one request and reads its answer.
func (s *LookupStream) lookup(req *djinnpb.LookupRequest) (*djinnpb.LookupStreamResponse, error) {
	if s == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup stream: missing (nil)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	if err := s.stream.Send(req); err != nil {
		s.fail(err)
		return nil, s.err
	}
	resp, err := s.stream.Recv()
	if err != nil {
		s.fail(err)
		return nil, s.err
	}
	if e := resp.GetError(); e != nil {
		return nil, errorFromProto(e)
	}
	return resp, nil
}

// fail ends the stream with err. A Send that fails with io.EOF means the
// server ended the stream, and the next Recv has its status.
func (s *LookupStream) fail(err error) {
	if errors.Is(err, io.EOF) {
		if _, e := s.stream.Recv(); e != nil && !errors.Is(e, io.EOF) {
			err = e
		}
	}
	if errors.Is(err, io.EOF) {
		s.err = djinn.Errorf(djinn.Unavailable, "lookup stream: ended by the server")
	} else {
		s.err = fromRPC(err)
	}
	s.cancel()
}

// Lookup returns one item matching tmpl, chosen at random among the
// matches, or nil when none does.
func (s *LookupStream) Lookup(tmpl ServiceTemplate) (*ServiceItem, error) {
	resp, err := s.lookup(&djinnpb.LookupRequest{Template: tmpl.Proto(), One: true})
	if err != nil || len(resp.GetItems()) == 0 {
		return nil, err
	}
	it, err := receivedItem("looked-up item", resp.GetItems()[0])
	if err != nil {
		return nil, err
	}
	return &it, nil
}

// LookupN returns the number of items matching tmpl and up to max of them
// (0 to math.MaxInt32; a negative max is djinn.ErrInvalidArgument).
func (s *LookupStream) LookupN(tmpl ServiceTemplate, max int) (total int, items []ServiceItem, err error) {
	if max < 0 || max > maxMatches {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must be 0 to %d", max, maxMatches)
	}
	resp, err := s.lookup(&djinnpb.LookupRequest{Template: tmpl.Proto(), MaxMatches: int32(max)})
	if err != nil {
		return 0, nil, err
	}
	items = make([]ServiceItem, len(resp.GetItems()))
	for i, it := range resp.GetItems() {
		if items[i], err = receivedItem("looked-up item", it); err != nil {
			return 0, nil, err
		}
	}
	return int(resp.GetTotal()), items, nil
}

// Close ends the stream. Lookups after it fail.
func (s *LookupStream) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		_ = s.stream.CloseSend()
		s.err = djinn.Errorf(djinn.InvalidArgument, "lookup stream: closed")
	}
	s.cancel()
	return nil
}
