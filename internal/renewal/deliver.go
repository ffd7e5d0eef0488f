package renewal

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// deliverer is the leader's Sink: it hands events to the delivery engine
// (one per event id, keyed by set), in log order, and records outcomes in
// the log: delivered events are forgotten, and a definite failure
// (UnknownEvent included) clears that one registration (LR.2.1). Sets are
// served apart: one whose retarget waits for its old listener to confirm
// it stopped holds up no other.
type deliverer struct {
	state   *State
	log     Proposer
	self    func() djinn.Ref
	logger  *slog.Logger
	engines [2]*event.Engine
	ops     event.Serial // the work of each set, in log order

	mu sync.Mutex
	// Guarded by mu.
	epochs   map[regKey]uint64
	acks     map[regKey]int64
	failures []*statepb.RenewalListen
	report   chan struct{}
}

type regKey struct {
	set djinn.ID
	eid int64
}

var _ Sink = (*deliverer)(nil)

func newDeliverer(s *State, log Proposer, self func() djinn.Ref, logger *slog.Logger, ec event.Config) *deliverer {
	d := &deliverer{
		state: s, log: log, self: self, logger: logger,
		epochs: map[regKey]uint64{}, acks: map[regKey]int64{},
		report: make(chan struct{}, 1),
	}
	for eid := range d.engines {
		cfg := ec
		cfg.OnDelivered = func(set djinn.ID, through uint64) { d.delivered(regKey{set, int64(eid)}, int64(through)) }
		cfg.OnFailure = func(set djinn.ID, _ event.Item, err error) event.Action {
			return d.failed(regKey{set, int64(eid)}, err)
		}
		d.engines[eid] = event.New(cfg)
	}
	return d
}

func (d *deliverer) run(ctx context.Context) {
	d.state.SetSink(d)
	d.reportLoop(ctx)
	d.state.SetSink(nil)
	for _, e := range d.engines {
		e.Close()
	}
	// Work in progress ends with the engines; waiters are released: the
	// change is in the log for the next leader.
	d.ops.Wait()
}

// addressed returns the event as sent: the state keeps events without an
// endpoint (members advertise different ones), so the source gets this
// leader's.
func (d *deliverer) addressed(ev *djinnpb.RemoteEvent) *djinnpb.RemoteEvent {
	src := ev.GetSource()
	return &djinnpb.RemoteEvent{
		Source:  &djinnpb.Ref{Endpoint: d.self().Endpoint, ServiceId: src.GetServiceId(), ObjectId: src.GetObjectId()},
		EventId: ev.GetEventId(), Sequence: ev.GetSequence(), Handback: ev.GetHandback(), Payload: ev.GetPayload(),
	}
}

func toRef(r *djinnpb.Ref) djinn.Ref {
	var out djinn.Ref
	out.Endpoint = r.GetEndpoint()
	copy(out.Service[:], r.GetServiceId())
	copy(out.Object[:], r.GetObjectId())
	return out
}

func (d *deliverer) push(k regKey, target *djinnpb.Ref, events ...*djinnpb.RemoteEvent) {
	items := make([]event.Item, len(events))
	for i, ev := range events {
		items[i] = event.Item{Cursor: uint64(ev.GetSequence()), Event: d.addressed(ev)}
	}
	if err := d.engines[k.eid].Push(k.set, toRef(target), items...); err != nil {
		d.logger.Warn("renewal: queueing an event failed", "set", wire.Fingerprint(k.set), "event", k.eid, "err", err)
	}
}

// Event implements Sink.
func (d *deliverer) Event(set djinn.ID, eid int64, target *djinnpb.Ref, epoch uint64, ev *djinnpb.RemoteEvent) {
	d.ops.Add(set, func() {
		k := regKey{set, eid}
		d.mu.Lock()
		if _, ok := d.epochs[k]; !ok {
			d.epochs[k] = epoch
		}
		d.mu.Unlock()
		d.push(k, target, ev)
	})
}

// Retargeted implements Sink.
func (d *deliverer) Retargeted(set djinn.ID, eid int64, target *djinnpb.Ref, epoch uint64, pending []*djinnpb.RemoteEvent, done chan struct{}) {
	d.ops.Add(set, func() {
		k := regKey{set, eid}
		d.engines[eid].Drop(set)
		d.mu.Lock()
		d.epochs[k] = epoch
		d.mu.Unlock()
		if target != nil && len(pending) > 0 {
			// LR.2.1 lets a new listener get what the old one did not.
			d.push(k, target, pending...)
		}
		if done != nil {
			close(done)
		}
	})
}

// Removed implements Sink.
func (d *deliverer) Removed(set djinn.ID) {
	d.ops.Add(set, func() {
		for _, e := range d.engines {
			e.Drop(set)
		}
		d.mu.Lock()
		for eid := range d.engines {
			delete(d.epochs, regKey{set, int64(eid)})
			delete(d.acks, regKey{set, int64(eid)})
		}
		d.mu.Unlock()
	})
}

func (d *deliverer) delivered(k regKey, through int64) {
	d.mu.Lock()
	d.acks[k] = max(d.acks[k], through)
	d.mu.Unlock()
	d.signal()
}

func (d *deliverer) signal() {
	select {
	case d.report <- struct{}{}:
	default:
	}
}

// failed decides what a failed delivery does (LR.2.1): a definite failure,
// UnknownEvent included, clears only that registration; indefinite ones
// are retried until the set's lease ends.
func (d *deliverer) failed(k regKey, err error) event.Action {
	if !djinn.IsDefinite(err) {
		return event.Retry
	}
	d.mu.Lock()
	d.failures = append(d.failures, &statepb.RenewalListen{SetId: k.set[:], EventId: k.eid, OnlyIfEpoch: d.epochs[k]})
	d.mu.Unlock()
	d.logger.Info("renewal: event registration cleared by a definite delivery failure", "set", wire.Fingerprint(k.set), "event", k.eid, "err", err)
	d.signal()
	return event.Stop
}

func (d *deliverer) reportLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.report:
		case <-retry.C:
		}
		d.mu.Lock()
		acks, failures := d.acks, d.failures
		d.acks, d.failures = map[regKey]int64{}, nil
		d.mu.Unlock()
		failed := false
		if len(acks) > 0 {
			c := &statepb.RenewalDelivered{}
			for k, through := range acks {
				c.Entries = append(c.Entries, &statepb.RenewalDeliveredEntry{SetId: k.set[:], EventId: k.eid, ThroughSequence: through})
			}
			if _, err := d.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_RenewalDelivered{RenewalDelivered: c}}); err != nil {
				if ctx.Err() != nil {
					return
				}
				d.mu.Lock()
				for k, through := range acks {
					d.acks[k] = max(d.acks[k], through)
				}
				d.mu.Unlock()
				failed = true
			}
		}
		var unrecorded []*statepb.RenewalListen
		for _, c := range failures {
			if _, err := d.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_RenewalListen{RenewalListen: c}}); err != nil {
				if ctx.Err() != nil {
					return
				}
				if djinn.KindOf(err) != djinn.NoSuchObject {
					unrecorded = append(unrecorded, c)
				}
			}
		}
		if len(unrecorded) > 0 {
			d.mu.Lock()
			d.failures = append(unrecorded, d.failures...)
			d.mu.Unlock()
			failed = true
		}
		if failed {
			d.logger.Warn("renewal: recording delivery outcomes failed; will retry")
			retry.Reset(100 * time.Millisecond)
		}
	}
}
