package renewal

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Paging a set's leases (GetLeases). A set may hold a million leases,
// about 100 MB: more than a client receives in one message. A page holds
// the leases after a key, in key order (the order every member agrees
// on, whatever the order the leases came in), up to a count and a number
// of bytes; its next is the key of its last lease. A lease in the set
// from the first page to the last is on exactly one page.

// MostPage is the most leases a page may ask for.
const MostPage = 100_000

// Page is a page of a set's leases.
type Page struct {
	Leases []*djinnpb.ClientLease
	// Next is the key to ask after for the next page; nil on the last.
	Next []byte
	// Total is how many leases the set holds.
	Total int
}

// CheckPage checks a page's arguments, which do not depend on the set:
// max is 0 (every lease in one answer) or 1 to MostPage, after empty or a
// key (a page's Next).
func CheckPage(max int, after []byte) error {
	if max < 0 || max > MostPage {
		return djinn.Errorf(djinn.InvalidArgument, "max %d: want 1 to %d leases a page, or 0 for every lease in one answer", max, MostPage)
	}
	if len(after) != 0 && len(after) != len(Key{}) {
		return djinn.Errorf(djinn.InvalidArgument, "after of %d bytes: want a page's next (%d bytes), or none from the first lease", len(after), len(Key{}))
	}
	return nil
}

// LeasesPage returns a page of a set's client leases (LR.2 getLeases):
// with max 0 every lease, refused ResourceExhausted when they pass
// maxBytes (never a part of them); otherwise at most max leases after the
// key after (none: from the first), in key order, ending before they pass
// maxBytes (at least one lease), Next naming where the next page starts.
// maxBytes bounds the leases as a GetLeasesResponse carries them.
func (s *Service) LeasesPage(ctx context.Context, id djinn.ID, max int, after []byte, maxBytes int) (Page, error) {
	if err := CheckPage(max, after); err != nil {
		return Page{}, err
	}
	_, _, err := s.live(ctx, id)
	var (
		p    Page
		more bool
	)
	if err == nil {
		if max == 0 {
			p, more, err = s.state.leasesWithin(id, s.now(), maxBytes)
		} else {
			var k *Key
			if len(after) > 0 {
				k = new(Key)
				copy(k[:], after)
			}
			p, err = s.state.leasesAfter(id, k, max, s.now(), maxBytes)
		}
	}
	// A deposed leader must not list leases its successor may have
	// removed, nor miss ones it added, nor deny a set it created.
	if err = s.lessor.ConfirmRead("renewal service", err); err != nil {
		return Page{}, err
	}
	if more {
		return Page{}, djinn.Errorf(djinn.ResourceExhausted,
			"renewal set %s holds %d leases, more than one answer holds (%d bytes, what a client receives by default less room around it): ask for them in pages, with a max and each page's next as the following one's after (the client library's Leases does)",
			id, p.Total, maxBytes)
	}
	return p, nil
}

// clientLeaseProto is a client lease as GetLeases carries it, at now.
func clientLeaseProto(c ClientLease, now time.Time) *djinnpb.ClientLease {
	return &djinnpb.ClientLease{
		Lease: ClientLeaseProto(c, now), DesiredExpirationUnixNanos: nanos(c.Desired),
		RenewDurationNanos: int64(c.Renew), LastError: c.LastErr,
	}
}

// pageBytes measures a page's leases as a GetLeasesResponse carries them
// (its field 1).
type pageBytes struct {
	size, max int
}

// fits adds a lease to the page, and reports whether the page still fits.
func (b *pageBytes) fits(pb *djinnpb.ClientLease) bool {
	b.size += wire.FieldSize(1, pb)
	return b.size <= b.max
}

// leasesWithin returns every client lease of a set, in the order they
// came, at now; more reports that they do not fit in maxBytes (then the
// page holds those that do, and the leases after the first that does not
// are not looked at).
func (s *State) leasesWithin(id djinn.ID, now time.Time, maxBytes int) (p Page, more bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return Page{}, false, noSuchSet(id)
	}
	p.Total = st.n
	b := pageBytes{max: maxBytes}
	for next := st.first; next != 0 && !more; next = s.cls.At(next - 1).next {
		s.visited++
		pb := clientLeaseProto(s.viewLocked(next-1), now)
		if more = !b.fits(pb); !more {
			p.Leases = append(p.Leases, pb)
		}
	}
	return p, more, nil
}

// leasesAfter returns a page of at most max of a set's client leases
// whose keys come after after (nil: from the first), in key order, at
// now, ending before they pass maxBytes (at least one lease). It finds
// where the page starts in the set's key order and reads on from there:
// it looks at the page's leases and the one after (whether there are
// more), whatever the set's size.
func (s *State) leasesAfter(id djinn.ID, after *Key, max int, now time.Time, maxBytes int) (Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return Page{}, noSuchSet(id)
	}
	s.orderLocked(st)
	p := Page{Total: st.n}
	if st.keyed == nil {
		return p, nil
	}
	var (
		b    = pageBytes{max: maxBytes}
		last uint32
		more bool
	)
	add := func(slot uint32) bool {
		s.visited++
		if len(p.Leases) == max {
			more = true
			return false
		}
		pb := clientLeaseProto(s.viewLocked(slot), now)
		if !b.fits(pb) && len(p.Leases) > 0 {
			more = true
			return false
		}
		p.Leases = append(p.Leases, pb)
		last = slot
		return true
	}
	if after == nil {
		st.keyed.Ascend(add)
	} else {
		s.pageAfter = *after
		st.keyed.AscendGreaterOrEqual(afterSlot, add)
	}
	if more {
		k := s.keyAt(last)
		p.Next = k[:]
	}
	return p, nil
}
