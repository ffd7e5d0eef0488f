package lease

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TableView is the table as it was when taken, for a snapshot: it does
// not change while the table goes on, and taking it copies no lease
// (slab.View). Release it once written.
type TableView struct {
	t          *Table
	recs       *slab.View[record]
	principals []string
}

// View takes a view of the table.
func (t *Table) View() *TableView {
	t.mu.Lock()
	defer t.mu.Unlock()
	return &TableView{t: t, recs: t.recs.View(), principals: t.principals[:len(t.principals):len(t.principals)]}
}

// Release lets the view go; it is read no more.
func (v *TableView) Release() {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	v.t.recs.Release(v.recs)
}

// Len returns the number of leases the view holds.
func (v *TableView) Len() int { return v.recs.Len() }

// Lease returns the cookie and principal of the lease h names, if the
// view holds it.
func (v *TableView) Lease(h Handle) (djinn.ID, string, bool) {
	if !v.recs.Live(uint32(h)) {
		return djinn.ID{}, "", false
	}
	r := v.recs.At(uint32(h))
	return r.cookie, v.principals[r.principal], true
}

// Each calls fn with every lease as a snapshot record, and stops at fn's
// first error. The record is reused: fn must not keep it.
func (v *TableView) Each(fn func(*statepb.LeaseRecord) error) error {
	var rec statepb.LeaseRecord
	var cookie, owner djinn.ID
	return v.recs.Each(func(_ uint32, r *record) error {
		cookie, owner = r.cookie, r.ownerID
		rec.Cookie, rec.OwnerKind, rec.OwnerId = cookie[:], uint32(r.kind), owner[:]
		// An expiration past the horizon is a renewal whose horizon
		// write is still pending and may fail: it is not state yet.
		rec.ExpiresUnixNanos, rec.HorizonUnixNanos = min(r.expires, r.horizon), r.horizon
		rec.Principal = v.principals[r.principal]
		return fn(&rec)
	})
}
