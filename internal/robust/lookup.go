package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lookup workload: workers register service items for a lease, each
// with an attribute carrying a version, set the attribute to later
// versions, look the item up — linearizable reads (answered by the
// leader) and reads that allow a bounded staleness (answered by any
// member, the workers ask a random one) — and cancel some of the
// registrations, looking up again after. CheckLookups judges the record.

type itemKind int

const (
	itemRegister itemKind = iota
	itemSetAttr
	itemCancel
	itemLookup
)

// ItemEvent is one call about a registered item and its answer.
type ItemEvent struct {
	Kind      itemKind
	Call, Ret int64 // when asked and answered (Ret: never if unknown)
	Outcome   Outcome
	Version   int64 // written (register, set) or found (a lookup that found it)
	Found     bool  // a lookup found the item
	Stale     int64 // a lookup's staleness bound in nanoseconds; 0: linearizable
	Node      int   // the member that answered
}

// ItemLog is the events of each item, by service id.
type ItemLog struct {
	mu     sync.Mutex
	events map[string][]ItemEvent // guarded by mu
	order  []string               // guarded by mu
}

func (l *ItemLog) add(id string, e ItemEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events == nil {
		l.events = map[string][]ItemEvent{}
	}
	if _, ok := l.events[id]; !ok {
		l.order = append(l.order, id)
	}
	l.events[id] = append(l.events[id], e)
}

// Items returns each item's events in the order recorded.
func (l *ItemLog) Items() [][]ItemEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]ItemEvent, 0, len(l.order))
	for _, k := range l.order {
		out = append(out, append([]ItemEvent(nil), l.events[k]...))
	}
	return out
}

const (
	// itemLease is the registrations' lease: longer than an item's life
	// in the workload, so none expires while it is looked up.
	itemLease = 20 * time.Second
	// staleBound is the staleness the workload's stale lookups allow.
	staleBound = time.Second
)

// lookupWorker runs items one after another until ctx ends.
func (r *Run) lookupWorker(ctx context.Context, id int, rng *rand.Rand) {
	caller := NewCaller(r.c, id)
	for ctx.Err() == nil {
		r.oneItem(ctx, caller, rng)
	}
}

// oneItem registers an item, looks it up and changes its attribute a few
// times, cancels it or not, and looks it up again.
func (r *Run) oneItem(ctx context.Context, caller *Caller, rng *rand.Rand) {
	var sid [16]byte
	for i := range sid {
		sid[i] = byte(rng.Uint32())
	}
	key := string(sid[:])
	version := int64(1)
	var cookie []byte
	e := r.itemCall(ctx, caller, ItemEvent{Kind: itemRegister, Version: version}, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLookupServiceClient(cc).Register(ctx, &djinnpb.RegisterRequest{
			Item: robustItem(sid[:], version), LeaseDurationNanos: int64(itemLease)})
		if err == nil {
			cookie = got.Lease.Cookie
		}
		return err
	})
	r.items.add(key, e)
	if e.Outcome != Done {
		r.pause(ctx, 50*time.Millisecond)
		return
	}
	for range 1 + rng.IntN(4) {
		r.pause(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond)
		r.lookupItem(ctx, caller, rng, sid[:])
		if rng.IntN(2) == 0 {
			version++
			v := version
			r.items.add(key, r.itemCall(ctx, caller, ItemEvent{Kind: itemSetAttr, Version: v}, func(ctx context.Context, cc *grpc.ClientConn) error {
				_, err := djinnpb.NewLookupServiceClient(cc).SetAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: cookie, Entries: robustItem(nil, v).Entries})
				return err
			}))
		}
	}
	if rng.IntN(2) == 0 {
		r.items.add(key, r.itemCall(ctx, caller, ItemEvent{Kind: itemCancel}, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := djinnpb.NewLandlordClient(cc).Cancel(ctx, &djinnpb.CancelRequest{Cookie: cookie})
			return err
		}))
	}
	for range 2 {
		r.pause(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond)
		r.lookupItem(ctx, caller, rng, sid[:])
	}
}

// robustItem is the workload's item: its attribute carries version.
func robustItem(sid []byte, version int64) *djinnpb.ServiceItem {
	return &djinnpb.ServiceItem{ServiceId: sid, Service: []byte("robust"), Types: []string{"robust.Item"},
		Entries: []*djinnpb.Entry{{Type: "robust.Version", Fields: []*djinnpb.Field{{Name: "v", Value: &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: version}}}}}}}
}

// lookupItem looks the item up, linearizable or allowing staleBound (at
// a random member), and records what was found.
func (r *Run) lookupItem(ctx context.Context, caller *Caller, rng *rand.Rand, sid []byte) {
	ev := ItemEvent{Kind: itemLookup}
	c := caller
	read := "linearizable"
	if rng.IntN(2) == 0 {
		ev.Stale = int64(staleBound)
		read = "stale=" + staleBound.String()
		c = NewCaller(r.c, rng.IntN(len(r.c.Nodes)))
	}
	e := r.itemCall(ctx, c, ev, func(ctx context.Context, cc *grpc.ClientConn) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "djinn-read", read)
		got, err := djinnpb.NewLookupServiceClient(cc).Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{ServiceId: sid}, MaxMatches: 1})
		if err == nil && len(got.Items) > 0 {
			ev.Found = true
			ev.Version = versionOf(got.Items[0])
		}
		return err
	})
	e.Found, e.Version = ev.Found, ev.Version
	if e.Outcome == Done {
		r.items.add(string(sid), e)
		r.count(map[bool]string{true: "stale lookups", false: "linearizable lookups"}[e.Stale > 0])
	}
}

// versionOf is the version an item's attribute carries, or -1.
func versionOf(it *djinnpb.ServiceItem) int64 {
	for _, e := range it.Entries {
		for _, f := range e.Fields {
			if e.Type == "robust.Version" && f.Name == "v" {
				return f.Value.GetIntValue()
			}
		}
	}
	return -1
}

// itemCall asks once through caller, recording when and what was
// answered.
func (r *Run) itemCall(ctx context.Context, caller *Caller, e ItemEvent, f func(context.Context, *grpc.ClientConn) error) ItemEvent {
	e.Call = r.clock.Now()
	o, _ := caller.Call(ctx, f)
	e.Ret, e.Outcome, e.Node = r.clock.Now(), o, caller.next
	if o == Unknown {
		e.Ret = never
	}
	return e
}

// CheckLookups checks each item's events:
//   - a linearizable lookup that began after the item's registration was
//     answered, before any cancel of it was asked and before its lease
//     could expire, finds it;
//   - no lookup finds an item whose cancel was answered before the
//     lookup began (for a stale lookup: more than its bound before);
//   - a stale lookup that began more than its bound after the
//     registration was answered (and before any cancel was asked) finds
//     it: it is never staler than it asked for;
//   - a lookup finds only versions of the attribute that some call
//     wrote, and none older than a version whose write was answered
//     before the lookup began (less the bound of a stale lookup).
//
// Calls whose outcome is unknown may have taken effect at any time after
// they were asked, or never.
func CheckLookups(items [][]ItemEvent) []string {
	var v []string
	for i, evs := range items {
		v = append(v, checkItem(i, evs)...)
	}
	return v
}

func checkItem(i int, evs []ItemEvent) []string {
	registered, cancelAsked, cancelled := never, never, never
	written := map[int64]bool{}
	for _, e := range evs {
		switch e.Kind {
		case itemRegister:
			written[e.Version] = true
			if e.Outcome == Done {
				registered = min(registered, e.Ret)
			}
		case itemSetAttr:
			written[e.Version] = true
		case itemCancel:
			cancelAsked = min(cancelAsked, e.Call)
			if e.Outcome == Done {
				cancelled = min(cancelled, e.Ret)
			}
		}
	}
	// least(t) is the newest version whose write was answered before t.
	least := func(t int64) int64 {
		var p int64
		for _, e := range evs {
			if (e.Kind == itemRegister || e.Kind == itemSetAttr) && e.Outcome == Done && e.Ret < t {
				p = max(p, e.Version)
			}
		}
		return p
	}
	var v []string
	found := map[string]bool{} // one report of each kind per item
	report := func(kind, msg string, e ItemEvent) {
		if !found[kind] {
			found[kind] = true
			v = append(v, fmt.Sprintf("item %d: %s: %s", i, msg, e))
		}
	}
	for _, e := range evs {
		if e.Kind != itemLookup {
			continue
		}
		seen := e.Call - e.Stale // the oldest state the lookup may show
		switch {
		case !e.Found && seen > registered && e.Ret < cancelAsked && e.Ret < registered+int64(itemLease):
			report("lost", "a registered item not found", e)
		case e.Found && seen > cancelled:
			report("resurrected", "found after its cancel was answered", e)
		case e.Found && !written[e.Version]:
			report("forged", fmt.Sprintf("attribute version %d that no call wrote", e.Version), e)
		case e.Found && e.Version < least(seen):
			report("stale", fmt.Sprintf("attribute version %d, older than version %d answered before", e.Version, least(seen)), e)
		}
	}
	return v
}

// String names the call, the member that answered and when.
func (e ItemEvent) String() string {
	kind := [...]string{"register", "set attributes", "cancel", "lookup"}[e.Kind]
	if e.Kind == itemLookup {
		kind = "linearizable lookup"
		if e.Stale > 0 {
			kind = fmt.Sprintf("lookup allowing %v staleness", time.Duration(e.Stale))
		}
	}
	ret := "never"
	if e.Ret != never {
		ret = time.Duration(e.Ret).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s at member %d (asked %v, answered %s)", kind, e.Node, time.Duration(e.Call).Round(time.Millisecond), ret)
}
