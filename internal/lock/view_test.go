package lock

import (
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A snapshot written from a view is the state when the view was taken,
// byte for byte, however the state changes while it is written.

// stepMore is builder.step, and now and then what step does not do: an
// owner's lease ends, a waiting request is cancelled, a transaction's
// locks in a group are dropped.
func (b *builder) stepMore() {
	switch k := b.rnd.IntN(12); {
	case k == 0 && len(b.owners) > 0:
		i := b.rnd.IntN(len(b.owners))
		var id djinn.ID
		copy(id[:], b.owners[i])
		b.s.LeaseEnded(lease.Owner{Kind: OwnerLeaseKind, ID: id})
		b.owners = append(b.owners[:i], b.owners[i+1:]...)
	case k == 1 && b.next > 0:
		b.s.ApplyCancel(&statepb.LockCancel{RequestIds: []uint64{1 + b.rnd.Uint64N(b.next)}})
	case k == 2 && len(b.sets) > 0:
		_ = b.s.ApplyDrop(&statepb.LockDrop{SetId: b.set(), Manager: mgr(b.rnd.Uint64N(2)), Txn: 1 + b.rnd.Uint64N(8)})
	default:
		b.step()
	}
}

// viewRecords writes view v in records of size bytes.
func viewRecords(t testing.TB, s *State, v *stateView, size int) []*statepb.LockRecord {
	t.Helper()
	var out []*statepb.LockRecord
	if err := s.writeView(v, size, func(r *statepb.LockRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestViewIsTheStateWhenTaken: two views, taken at random points of a
// random history, each write the records the state exported then
// encodes, after the history went on under them; released, they leave
// nothing behind.
func TestViewIsTheStateWhenTaken(t *testing.T) {
	for seed := range uint64(300) {
		b := newBuilder(t, seed)
		for range b.rnd.IntN(150) {
			b.stepMore()
		}
		want1 := streamed(t, b.s.export(), 61)
		v1 := b.s.takeView()
		for range b.rnd.IntN(100) {
			b.stepMore()
		}
		want2 := streamed(t, b.s.export(), 61)
		v2 := b.s.takeView()
		for range b.rnd.IntN(200) {
			b.stepMore()
		}
		sameRecords(t, viewRecords(t, b.s, v2, 61), want2)
		sameRecords(t, viewRecords(t, b.s, v1, 61), want1)
		b.s.releaseView(v1)
		b.s.releaseView(v2)
		if len(b.s.views) != 0 || len(b.s.table.views) != 0 {
			t.Fatalf("seed %d: %d state views and %d table views open after release", seed, len(b.s.views), len(b.s.table.views))
		}
		now := streamed(t, b.s.export(), 61)
		v3 := b.s.takeView()
		sameRecords(t, viewRecords(t, b.s, v3, 61), now)
		b.s.releaseView(v3)
	}
}

// TestViewCopiesNothingUntouched: a view of 10,000 sets keeps a copy of
// the sets that changed while it was open, and of no other.
func TestViewCopiesNothingUntouched(t *testing.T) {
	s := bigState(t, 10_000)
	v := s.takeView()
	defer s.releaseView(v)
	if len(v.tv.saved) != 0 || len(v.names) != 0 || len(v.holders) != 0 {
		t.Fatalf("a new view holds %d sets, %d names, %d holders", len(v.tv.saved), len(v.names), len(v.holders))
	}
	var id djinn.ID
	copy(id[:], s.setInfo[5].id[:])
	s.LeaseEnded(lease.Owner{Kind: SetLeaseKind, ID: id})
	if len(v.tv.saved) != 1 || len(v.names) != 1 {
		t.Fatalf("after one set ended the view holds %d sets and %d names, want 1 and 1", len(v.tv.saved), len(v.names))
	}
}

// TestViewAcrossReset: a view of a state that was replaced while it was
// open says so instead of writing a mixture.
func TestViewAcrossReset(t *testing.T) {
	b := newBuilder(t, 3)
	for range 50 {
		b.step()
	}
	v := b.s.takeView()
	defer b.s.releaseView(v)
	b.s.Reset()
	err := b.s.writeView(v, 61, func(*statepb.LockRecord) error { return nil })
	if djinn.KindOf(err) != djinn.Unavailable {
		t.Fatalf("writing a view of a replaced state: %v, want Unavailable", err)
	}
}

// TestViewAllocations: taking a view of 20,000 sets (each with an owner
// of its own) makes a few allocations, none per set: the copy an export
// makes is two or three per set.
func TestViewAllocations(t *testing.T) {
	s := bigState(t, 20_000)
	allocs := testing.AllocsPerRun(5, func() { s.releaseView(s.takeView()) })
	t.Logf("%.0f allocations to take and release a view of 20,000 sets", allocs)
	if allocs > 64 {
		t.Errorf("%.0f allocations to take a view of 20,000 sets, want a few (none per set)", allocs)
	}
}
