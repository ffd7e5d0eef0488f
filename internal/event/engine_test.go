package event

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

var (
	keyA    = keyN(1)
	targetA = djinn.Ref{Endpoint: "a.example:4160", Service: djinn.ID{0xa}, Object: djinn.ID{0xa, 1}}
	targetB = djinn.Ref{Endpoint: "b.example:4160", Service: djinn.ID{0xb}, Object: djinn.ID{0xb, 1}}

	errDown    = djinn.Errorf(djinn.Unavailable, "listener a.example:4160: connection refused")
	errGone    = djinn.Errorf(djinn.NoSuchObject, "listener object 0a01: no such object")
	errUnknown = djinn.Errorf(djinn.UnknownEvent, "event id 7: unknown event")
)

// keyN returns a key made from n.
func keyN(n int) djinn.ID {
	var k djinn.ID
	k[0], k[1], k[2] = byte(n>>16), byte(n>>8), byte(n)
	k[15] = 0x5e
	return k
}

// item returns the item with cursor c for key; its event carries c as
// sequence number and the key as handback, so the fake can tell them apart.
func item(key djinn.ID, c uint64) Item {
	return Item{Cursor: c, Event: &djinnpb.RemoteEvent{Sequence: int64(c), EventId: 7, Handback: key[:]}}
}

// items returns items from..to (inclusive) for key.
func items(key djinn.ID, from, to uint64) []Item {
	var out []Item
	for c := from; c <= to; c++ {
		out = append(out, item(key, c))
	}
	return out
}

func seqs(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// elapse lets d of fake time pass, then waits for every goroutine of the
// bubble to block.
func elapse(d time.Duration) {
	<-time.After(d)
	synctest.Wait()
}

func callSeqs(calls []call) [][]int64 {
	var out [][]int64
	for _, c := range calls {
		out = append(out, c.seqs)
	}
	return out
}

// deliveryScenario is one delivery story: the listener answers by script.
type deliveryScenario struct {
	name          string
	maxBatch      int
	script        []reply
	onFailure     func(Item, error) Action // nil: the default policy, unrecorded
	push          uint64
	wantCalls     [][]int64
	wantDelivered []uint64
	wantFailures  []uint64
	wantStats     Stats
}

// deliveryScenarios are the delivery stories of TestDeliveryScenarios.
var deliveryScenarios = []deliveryScenario{{
	name:          "in order across batches",
	maxBatch:      3,
	push:          10,
	wantCalls:     [][]int64{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10}},
	wantDelivered: []uint64{3, 6, 9, 10},
	wantStats:     Stats{Sends: 4, Delivered: 10},
}, {
	name:          "partial accept resumes after the accepted prefix",
	maxBatch:      4,
	script:        []reply{{2, errDown}},
	push:          6,
	wantCalls:     [][]int64{{1, 2, 3, 4}, {3, 4, 5, 6}},
	wantDelivered: []uint64{2, 6},
	wantStats:     Stats{Sends: 2, Delivered: 6, Retried: 1},
}, {
	name:          "indefinite failures are retried then succeed (EM.4.1)",
	maxBatch:      2,
	script:        []reply{{0, errDown}, {0, errDown}, {0, errDown}},
	push:          2,
	wantCalls:     [][]int64{{1, 2}, {1, 2}, {1, 2}, {1, 2}},
	wantDelivered: []uint64{2},
	wantStats:     Stats{Sends: 4, Delivered: 2, Retried: 3},
}, {
	name:          "definite failure stops the queue by default (EM.4.1)",
	maxBatch:      3,
	script:        []reply{{1, errGone}},
	push:          5,
	wantCalls:     [][]int64{{1, 2, 3}},
	wantDelivered: []uint64{1},
	wantStats:     Stats{Sends: 1, Delivered: 1, Failed: 4},
}, {
	name:         "Stop reports the failed item and drops the queue",
	maxBatch:     3,
	script:       []reply{{0, errDown}},
	onFailure:    always(Stop),
	push:         4,
	wantCalls:    [][]int64{{1, 2, 3}},
	wantFailures: []uint64{1},
	wantStats:    Stats{Sends: 1, Failed: 4},
}, {
	name:          "Skip drops only the head item",
	maxBatch:      3,
	script:        []reply{{1, errUnknown}},
	onFailure:     skipUnknown,
	push:          4,
	wantCalls:     [][]int64{{1, 2, 3}, {3, 4}},
	wantDelivered: []uint64{1, 4},
	wantFailures:  []uint64{2},
	wantStats:     Stats{Sends: 2, Delivered: 3, Failed: 1},
}, {
	name:          "OnFailure may retry a definite failure",
	maxBatch:      3,
	script:        []reply{{0, errGone}},
	onFailure:     always(Retry),
	push:          2,
	wantCalls:     [][]int64{{1, 2}, {1, 2}},
	wantDelivered: []uint64{2},
	wantFailures:  []uint64{1},
	wantStats:     Stats{Sends: 2, Delivered: 2, Retried: 1},
}, {
	name:          "an unknown action counts as retry",
	maxBatch:      3,
	script:        []reply{{0, errGone}},
	onFailure:     always(Action(42)),
	push:          1,
	wantCalls:     [][]int64{{1}, {1}},
	wantDelivered: []uint64{1},
	wantFailures:  []uint64{1},
	wantStats:     Stats{Sends: 2, Delivered: 1, Retried: 1},
}, {
	name:          "a short answer without an error is an internal failure and retried",
	maxBatch:      3,
	script:        []reply{{1, nil}},
	onFailure:     always(Retry),
	push:          3,
	wantCalls:     [][]int64{{1, 2, 3}, {2, 3}},
	wantDelivered: []uint64{1, 3},
	wantFailures:  []uint64{2},
	wantStats:     Stats{Sends: 2, Delivered: 3, Retried: 1},
}, {
	name:          "an answer beyond the batch counts as all accepted",
	maxBatch:      2,
	script:        []reply{{5, errDown}},
	push:          3,
	wantCalls:     [][]int64{{1, 2}, {3}},
	wantDelivered: []uint64{2, 3},
	wantStats:     Stats{Sends: 2, Delivered: 3},
}}

// skipUnknown skips an item its listener does not know and retries others.
func skipUnknown(_ Item, err error) Action {
	if errors.Is(err, djinn.ErrUnknownEvent) {
		return Skip
	}
	return Retry
}

// always answers a to every failure.
func always(a Action) func(Item, error) Action { return func(Item, error) Action { return a } }

// TestDeliveryScenarios pushes items 1..push for one key and lets an hour
// of fake time pass: every row is one delivery story.
func TestDeliveryScenarios(t *testing.T) {
	for _, tt := range deliveryScenarios {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runDeliveryScenario(t, tt) })
		})
	}
}

// runDeliveryScenario pushes tt's items, lets an hour pass and checks the
// sends, deliveries, failures and stats tt wants.
func runDeliveryScenario(t *testing.T, tt deliveryScenario) {
	fs := &fakeSender{script: tt.script}
	var rec recorder
	cfg := Config{Sender: fs, MaxBatch: tt.maxBatch, MinBackoff: time.Second, MaxBackoff: time.Minute, OnDelivered: rec.onDelivered}
	if tt.onFailure != nil {
		cfg.OnFailure = rec.onFailure(tt.onFailure)
	}
	e := New(cfg)
	defer e.Close()
	if err := e.Push(keyA, targetA, items(keyA, 1, tt.push)...); err != nil {
		t.Fatalf("Push: %v", err)
	}
	elapse(time.Hour)

	if got := callSeqs(fs.Calls()); !slices.EqualFunc(got, tt.wantCalls, slices.Equal) {
		t.Errorf("sends = %v, want %v", got, tt.wantCalls)
	}
	if got := rec.Delivered(keyA); !slices.Equal(got, tt.wantDelivered) {
		t.Errorf("delivered through = %v, want %v", got, tt.wantDelivered)
	}
	var failed []uint64
	for _, f := range rec.Failures() {
		if f.key != keyA {
			t.Errorf("failure for key %v, want %v", f.key, keyA)
		}
		failed = append(failed, f.cursor)
	}
	if !slices.Equal(failed, tt.wantFailures) {
		t.Errorf("failures at cursors %v, want %v", failed, tt.wantFailures)
	}
	if got := e.Stats(); got != tt.wantStats {
		t.Errorf("stats = %+v, want %+v", got, tt.wantStats)
	}
}

// TestBackoffGrows checks the waits between retries: the k-th lies in
// [d/2, d] with d = MinBackoff·2^(k-1) capped at MaxBackoff.
func TestBackoffGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 7
		fs := &fakeSender{}
		for range failures {
			fs.script = append(fs.script, reply{0, errDown})
		}
		e := New(Config{Sender: fs, MinBackoff: time.Second, MaxBackoff: 8 * time.Second})
		defer e.Close()
		if err := e.Push(keyA, targetA, item(keyA, 1)); err != nil {
			t.Fatal(err)
		}
		elapse(time.Hour)
		calls := fs.Calls()
		if len(calls) != failures+1 {
			t.Fatalf("%d sends, want %d", len(calls), failures+1)
		}
		d := time.Second
		for k := 1; k < len(calls); k++ {
			got := calls[k].at.Sub(calls[k-1].at)
			if got < d/2 || got > d {
				t.Errorf("wait before retry %d = %v, want within [%v, %v]", k, got, d/2, d)
			}
			d = min(2*d, 8*time.Second)
		}
		if got := fs.Got(keyA); !slices.Equal(got, []int64{1}) {
			t.Errorf("accepted %v, want [1]", got)
		}
	})
}

// TestFailingSenderDoesNotSpin: a listener that always fails costs about
// one Send per backoff, not a loop.
func TestFailingSenderDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{answer: func(_ context.Context, _ call) (int, error) { return 0, errDown }}
		e := New(Config{Sender: fs, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
		defer e.Close()
		if err := e.Push(keyA, targetA, item(keyA, 1)); err != nil {
			t.Fatal(err)
		}
		elapse(time.Minute)
		// The waits grow from 50-100ms to 0.5-1s: at least 60 and at most
		// about 125 sends fit in a minute.
		if n := len(fs.Calls()); n < 60 || n > 130 {
			t.Errorf("%d sends in a minute of failures, want 60 to 130", n)
		}
		if s := e.Stats(); s.Queues != 1 || s.Queued != 1 || s.Delivered != 0 {
			t.Errorf("stats = %+v, want the item still queued", s)
		}
	})
}

// TestPushRules checks Push's argument rules: each row is one rule, and a
// refused Push changes nothing.
func TestPushRules(t *testing.T) {
	nilEvent := item(keyA, 2)
	nilEvent.Event = nil
	tests := []struct {
		name     string
		noSender bool
		setup    func(e *Engine) error // with the sender holding every Send
		target   djinn.Ref
		items    []Item
		wantKind djinn.Kind
		wantIn   []string // substrings of the message
	}{{
		name:     "target missing (EM.4.1 listener null)",
		target:   djinn.Ref{},
		items:    items(keyA, 1, 1),
		wantKind: djinn.InvalidArgument,
		wantIn:   []string{keyA.String(), "target missing"},
	}, {
		name:     "event missing",
		target:   targetA,
		items:    []Item{item(keyA, 1), nilEvent},
		wantKind: djinn.InvalidArgument,
		wantIn:   []string{keyA.String(), "cursor 2", "event missing"},
	}, {
		name:     "cursors must increase within a push",
		target:   targetA,
		items:    []Item{item(keyA, 3), item(keyA, 3)},
		wantKind: djinn.InvalidArgument,
		wantIn:   []string{"cursor 3 after 3"},
	}, {
		name:     "cursors must increase after the queued items",
		setup:    func(e *Engine) error { return e.Push(keyA, targetA, items(keyA, 1, 3)...) },
		target:   targetA,
		items:    items(keyA, 2, 4),
		wantKind: djinn.InvalidArgument,
		wantIn:   []string{"cursor 2 after queued 3"},
	}, {
		name:     "queue bound (DESIGN 7 quotas)",
		setup:    func(e *Engine) error { return e.Push(keyA, targetA, items(keyA, 1, 3)...) },
		target:   targetA,
		items:    items(keyA, 4, 5),
		wantKind: djinn.ResourceExhausted,
		wantIn:   []string{keyA.String(), "3 queued and 2 new", "bound of 4"},
	}, {
		name:     "engine closed",
		setup:    func(e *Engine) error { e.Close(); return nil },
		target:   targetA,
		items:    items(keyA, 1, 1),
		wantKind: djinn.Unavailable,
		wantIn:   []string{keyA.String(), "closed"},
	}, {
		name:     "no sender",
		noSender: true,
		target:   targetA,
		items:    items(keyA, 1, 1),
		wantKind: djinn.Unsupported,
		wantIn:   []string{keyA.String(), "no sender"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{MaxQueue: 4, MaxBatch: 2}
				if !tt.noSender {
					cfg.Sender = &fakeSender{answer: func(ctx context.Context, _ call) (int, error) {
						<-ctx.Done()
						return 0, ctx.Err()
					}}
				}
				e := New(cfg)
				defer e.Close()
				if tt.setup != nil {
					if err := tt.setup(e); err != nil {
						t.Fatalf("setup: %v", err)
					}
				}
				synctest.Wait()
				before := e.Stats()
				err := e.Push(keyA, tt.target, tt.items...)
				if !errors.Is(err, tt.wantKind) {
					t.Fatalf("Push = %v, want an error of kind %v", err, tt.wantKind)
				}
				for _, s := range tt.wantIn {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
				after := e.Stats()
				after.Overflowed = before.Overflowed
				if after != before {
					t.Errorf("stats after a refused Push = %+v, want %+v", after, before)
				}
			})
		})
	}
}

// TestOverflow checks that a full queue refuses a Push whole, names the key
// and bound, counts the refused items, and takes items again once drained.
func TestOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		fs := &fakeSender{answer: func(_ context.Context, c call) (int, error) {
			<-release
			return len(c.seqs), nil
		}}
		e := New(Config{Sender: fs, MaxQueue: 3, MaxBatch: 2})
		defer e.Close()
		if err := e.Push(keyA, targetA, items(keyA, 1, 3)...); err != nil {
			t.Fatalf("Push up to the bound: %v", err)
		}
		err := e.Push(keyA, targetA, items(keyA, 4, 5)...)
		if !errors.Is(err, djinn.ErrResourceExhausted) {
			t.Fatalf("Push past the bound = %v, want resource exhausted", err)
		}
		if msg := err.Error(); !strings.Contains(msg, keyA.String()) || !strings.Contains(msg, "bound of 3") {
			t.Errorf("error %q does not name the key and the bound", msg)
		}
		if err := e.Push(keyA, targetA, item(keyA, 4)); err == nil {
			t.Error("Push of one more item succeeded, want refused")
		}
		if s := e.Stats(); s.Overflowed != 3 || s.Queued != 3 {
			t.Errorf("stats = %+v, want 3 overflowed and 3 queued", s)
		}
		close(release)
		synctest.Wait()
		if err := e.Push(keyA, targetA, items(keyA, 4, 6)...); err != nil {
			t.Fatalf("Push after draining: %v", err)
		}
		synctest.Wait()
		if got := fs.Got(keyA); !slices.Equal(got, seqs(1, 6)) {
			t.Errorf("accepted %v, want 1..6", got)
		}
	})
}
