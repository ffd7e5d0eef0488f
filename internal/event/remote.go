package event

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Remote is a generator's remote event for one registration's listener:
// what a service's state machine decides to send.
type Remote struct {
	Key      djinn.ID     // the registration, which names its queue
	Listener *djinnpb.Ref // where the event goes
	EventID  int64
	Seq      int64 // also the item's cursor
	Handback []byte
	Payload  proto.Message // the event's typed description
}

// PushRemote queues each event, from source, on its registration's queue.
// An event that cannot be queued (its payload or listener does not
// encode, or its queue is full) is left out and named in the error; the
// others are queued.
func (e *Engine) PushRemote(source djinn.Ref, evs ...Remote) error {
	src := wire.Ref(source)
	var errs []error
	for _, r := range evs {
		payload, err := anypb.New(r.Payload)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d seq %d: payload: %w", r.EventID, r.Seq, err))
			continue
		}
		// The listener is a registration's, as the state keeps it.
		target, err := wire.RefStored("listener", r.Listener)
		if err != nil {
			errs = append(errs, fmt.Errorf("event %d seq %d: %w", r.EventID, r.Seq, err))
			continue
		}
		ev := &djinnpb.RemoteEvent{Source: src, EventId: r.EventID, Sequence: r.Seq, Handback: r.Handback, Payload: payload}
		if err := e.Push(r.Key, target, Item{Cursor: uint64(r.Seq), Event: ev}); err != nil {
			errs = append(errs, fmt.Errorf("event %d seq %d: %w", r.EventID, r.Seq, err))
		}
	}
	return errors.Join(errs...)
}

// CancelOnDefinite is an OnFailure for generators whose registrations are
// leases: indefinite failures are retried (until the lease ends and the
// queue is dropped); a definite one — the listener does not know the
// event, or does not exist — stops the queue and cancels the
// registration's lease (EV.2.3: a listener may refuse further events).
// what names the registrations in the log.
func CancelOnDefinite(log *slog.Logger, what string, cancel func(context.Context, []djinn.ID) []error) func(djinn.ID, Item, error) Action {
	return func(key djinn.ID, _ Item, err error) Action {
		if !djinn.IsDefinite(err) {
			return Retry
		}
		log.Info("a listener refused an event; cancelling its "+what, "err", err)
		go func() {
			ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
			defer stop()
			cancel(ctx, []djinn.ID{key})
		}()
		return Stop
	}
}
