package event

import (
	"context"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// fakeSender is the in-memory Sender the tests deliver to. By default it
// answers from script, one reply per Send, and accepts everything once the
// script is used up; answer, if set, replaces that.
type fakeSender struct {
	answer func(ctx context.Context, c call) (int, error)

	mu sync.Mutex
	// The fields below are guarded by mu.
	script   []reply
	calls    []call
	got      map[djinn.ID][]int64 // sequence numbers accepted, by key (from the handback)
	inFlight map[djinn.ID]int     // Sends in flight, by key
	overlaps int                  // Sends that started while another for the same key was in flight
}

var _ Sender = (*fakeSender)(nil)

// call is one Send as the fake saw it.
type call struct {
	at     time.Time
	key    djinn.ID
	target djinn.Ref
	seqs   []int64
}

// reply is a scripted answer.
type reply struct {
	n   int
	err error
}

func (f *fakeSender) Send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	c := call{at: time.Now(), target: target}
	copy(c.key[:], events[0].GetHandback())
	for _, ev := range events {
		c.seqs = append(c.seqs, ev.GetSequence())
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	if f.inFlight == nil {
		f.inFlight = map[djinn.ID]int{}
	}
	if f.inFlight[c.key] > 0 {
		f.overlaps++
	}
	f.inFlight[c.key]++
	var n int
	var err error
	scripted := f.answer == nil && len(f.script) > 0
	if scripted {
		n, err = f.script[0].n, f.script[0].err
		f.script = f.script[1:]
	}
	f.mu.Unlock()

	switch {
	case f.answer != nil:
		n, err = f.answer(ctx, c)
	case !scripted:
		n = len(events)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight[c.key]--
	if f.got == nil {
		f.got = map[djinn.ID][]int64{}
	}
	f.got[c.key] = append(f.got[c.key], c.seqs[:min(max(n, 0), len(c.seqs))]...)
	return n, err
}

// Calls returns the Sends made so far.
func (f *fakeSender) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// Got returns the sequence numbers accepted for key.
func (f *fakeSender) Got(key djinn.ID) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.got[key]...)
}

// recorder records the engine's callbacks.
type recorder struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	delivered map[djinn.ID][]uint64
	failures  []failure
	closed    bool // callbacks are errors from now on
	late      int  // callbacks after closed
}

type failure struct {
	key    djinn.ID
	cursor uint64
	err    error
}

func (r *recorder) onDelivered(key djinn.ID, through uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.late++
	}
	if r.delivered == nil {
		r.delivered = map[djinn.ID][]uint64{}
	}
	r.delivered[key] = append(r.delivered[key], through)
}

// onFailure returns an OnFailure that records each failure and answers with
// policy.
func (r *recorder) onFailure(policy func(Item, error) Action) func(djinn.ID, Item, error) Action {
	return func(key djinn.ID, it Item, err error) Action {
		r.mu.Lock()
		if r.closed {
			r.late++
		}
		r.failures = append(r.failures, failure{key, it.Cursor, err})
		r.mu.Unlock()
		return policy(it, err)
	}
}

func (r *recorder) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
}

func (r *recorder) Delivered(key djinn.ID) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.delivered[key]...)
}

func (r *recorder) Failures() []failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]failure(nil), r.failures...)
}

func (r *recorder) Late() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late
}
