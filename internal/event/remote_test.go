package event

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
)

// TestPushRemote: events that encode are queued and delivered from the
// source given, with their ids, sequence numbers, handbacks and payloads;
// those that do not are left out and named in the error.
func TestPushRemote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{}
		e := New(Config{Sender: fs})
		defer e.Close()
		src := djinn.Ref{Endpoint: "src.example:4161", Service: djinn.ID{0x5}, Object: djinn.ID{0x5, 1}}
		k1, k2 := djinn.ID{1}, djinn.ID{2}
		listener := wire.Ref(targetA)
		err := e.PushRemote(src,
			Remote{Key: k1, Listener: listener, EventID: 7, Seq: 1, Handback: k1[:], Payload: wrapperspb.String("one")},
			Remote{Key: k2, Listener: nil, EventID: 8, Seq: 1, Handback: k2[:], Payload: wrapperspb.String("lost")},
			Remote{Key: k1, Listener: listener, EventID: 7, Seq: 2, Handback: k1[:], Payload: nil},
			Remote{Key: k1, Listener: listener, EventID: 7, Seq: 3, Handback: k1[:], Payload: wrapperspb.String("three")},
		)
		if err == nil || !strings.Contains(err.Error(), "event 8 seq 1") || !strings.Contains(err.Error(), "event 7 seq 2") {
			t.Errorf("PushRemote: %v, want an error naming event 8 seq 1 and event 7 seq 2", err)
		}
		synctest.Wait()
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if got := fs.got[k1]; !slices.Equal(got, []int64{1, 3}) {
			t.Errorf("delivered %v for the first registration, want 1 and 3", got)
		}
		if len(fs.got[k2]) != 0 {
			t.Errorf("delivered %v for the registration without a listener", fs.got[k2])
		}
		for _, c := range fs.calls {
			if c.target != targetA {
				t.Errorf("sent to %v, want %v", c.target, targetA)
			}
		}
	})
}

// TestCancelOnDefinite: an indefinite failure is retried and cancels
// nothing; a definite one stops the queue and cancels the registration's
// lease (EV.2.3).
func TestCancelOnDefinite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu        sync.Mutex
			cancelled []djinn.ID
		)
		onFailure := CancelOnDefinite(slog.New(slog.DiscardHandler), "registration", func(_ context.Context, ids []djinn.ID) []error {
			mu.Lock()
			defer mu.Unlock()
			cancelled = append(cancelled, ids...)
			return make([]error, len(ids))
		})
		key := djinn.ID{9}
		if a := onFailure(key, Item{}, djinn.Errorf(djinn.Unavailable, "listener down")); a != Retry {
			t.Errorf("indefinite failure: %v, want Retry", a)
		}
		synctest.Wait()
		mu.Lock()
		if len(cancelled) != 0 {
			t.Errorf("an indefinite failure cancelled %v", cancelled)
		}
		mu.Unlock()
		if a := onFailure(key, Item{}, djinn.Errorf(djinn.UnknownEvent, "not interested")); a != Stop {
			t.Errorf("definite failure: %v, want Stop", a)
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(cancelled, []djinn.ID{key}) {
			t.Errorf("a definite failure cancelled %v, want the registration %v", cancelled, key)
		}
	})
}

// TestPushRemoteToAListenerFromBefore: a registration's listener taken
// before endpoints were checked strictly (its host has a space) is as the
// state keeps it: its events are still queued for it, not left out.
func TestPushRemoteToAListenerFromBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &fakeSender{}
		e := New(Config{Sender: fs})
		defer e.Close()
		src := djinn.Ref{Endpoint: "src.example:4161", Service: djinn.ID{0x5}, Object: djinn.ID{0x5, 1}}
		old := targetA
		old.Endpoint = "old host:9"
		k := djinn.ID{3}
		if err := e.PushRemote(src, Remote{Key: k, Listener: wire.Ref(old), EventID: 7, Seq: 1, Handback: k[:], Payload: wrapperspb.String("one")}); err != nil {
			t.Fatalf("PushRemote to a listener from before: %v, want it queued", err)
		}
		synctest.Wait()
		fs.mu.Lock()
		defer fs.mu.Unlock()
		if got := fs.got[k]; !slices.Equal(got, []int64{1}) {
			t.Errorf("delivered %v, want event 1", got)
		}
	})
}
