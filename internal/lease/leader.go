package lease

import (
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The Table's leader-side operations. Each takes the time it acts at, so
// it is a plain function of the table and its arguments; the Lessor calls
// them from its loops and its Renew and Cancel, and logs what they return.

// horizonOf returns the horizon to log for a lease expiring at exp (unix
// nanos): slack past it, saturating at never.
func horizonOf(exp int64, slack time.Duration) int64 {
	if exp == never || exp > never-int64(slack) {
		return never
	}
	return exp + int64(slack)
}

// Promote starts a leader's term at now: every live lease gets
// max(horizon, now + grace) — a lease whose horizon passed stays expired —
// and the expiry heap is rebuilt from those expirations.
func (t *Table) Promote(now time.Time, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := now.UnixNano()
	floor := n + int64(grace)
	// A promoted expiration may be earlier than the one this node knew.
	t.cuts.Add(1)
	h := &t.byExpiry
	h.Reset()
	for slot := range t.recs.Cap() {
		if !t.recs.Live(slot) {
			continue
		}
		r := t.recs.Mut(slot)
		switch {
		case plantedForgetsHorizons:
		case r.horizon <= n:
			r.expires = r.horizon
		case r.horizon < floor:
			r.expires = floor
		default:
			r.expires = r.horizon
		}
		h.Append(slot, r.expires)
	}
	h.Init()
	t.signal()
}

// RenewResult is one renewal's outcome.
type RenewResult struct {
	Granted time.Duration
	Err     error
}

// Pending is what renewals granted in memory still need from the log: the
// horizons to write before they hold. If the write fails, Unrenew takes
// them back.
type Pending struct {
	// Horizons are the entries to log, in one LeaseHorizon command.
	Horizons []*statepb.HorizonEntry
	// Indexes are the positions, in the renewal's arguments, of the
	// renewals that wait for Horizons.
	Indexes []int
	undos   []undo
}

// undo restores one renewal's lease to the expiration it had.
type undo struct {
	slot   uint32
	cookie djinn.ID
	old    int64
	gen    uint16 // the record's gen right after the renewal
}

// Renew renews leases at now (LE.2.2) for holder: cookies[i] for
// durations[i], each negotiated by its kind's policy. A renewal whose new
// expiration passes the lease's logged horizon is granted in memory and
// listed in the returned Pending, with the horizon (slack past it) to log
// first.
//
// A holder that is not the lease's principal holds its cookie as a
// capability to keep it alive (a renewal service does): its renewal never
// brings the expiration earlier. Asked for less than the lease has left,
// it is granted what it asked and the lease keeps its later expiration,
// which only the owner may bring forward (or end, with cancel).
func (t *Table) Renew(now time.Time, slack time.Duration, holder string, cookies []djinn.ID, durations []time.Duration) ([]RenewResult, Pending) {
	out := make([]RenewResult, len(cookies))
	var p Pending
	n := now.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	who, known := t.numbers[holder]
	for i, c := range cookies {
		d := durations[i]
		if err := CheckRenewal(d); err != nil {
			out[i].Err = err
			continue
		}
		slot, r, ok := t.findLocked(c)
		if !ok || r.expires <= n {
			out[i].Err = unknownLease(c)
			continue
		}
		remaining := djinn.Forever
		if r.expires != never {
			remaining = time.Duration(r.expires - n)
		}
		g := t.policyLocked(Kind(r.kind)).Renewal(d, remaining)
		exp := toNanos(djinn.AddDuration(now, g))
		if exp < r.expires && (!known || r.principal != who) {
			out[i].Granted = g // the lease lives on as it was
			continue
		}
		old, horizon := r.expires, r.horizon
		t.setExpiresLocked(slot, exp)
		out[i].Granted = g
		if exp > horizon {
			p.Horizons = append(p.Horizons, &statepb.HorizonEntry{Cookie: c[:], HorizonUnixNanos: horizonOf(exp, slack)})
			p.Indexes = append(p.Indexes, i)
			p.undos = append(p.undos, undo{slot, c, old, t.recs.At(slot).gen})
		}
	}
	return out, p
}

// Unrenew takes back the renewals of p, whose horizons the log did not
// take: each lease keeps the expiration it had (LE.2.2), unless another
// renewal changed it meanwhile.
func (t *Table) Unrenew(p Pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for j := len(p.undos) - 1; j >= 0; j-- {
		u := p.undos[j]
		if t.holds(u.slot, u.cookie) && t.recs.At(u.slot).gen == u.gen {
			t.setExpiresLocked(u.slot, u.old)
		}
	}
}

// holds reports whether slot holds the lease with cookie c.
func (t *Table) holds(slot uint32, c djinn.ID) bool {
	return t.recs.Live(slot) && t.recs.At(slot).cookie == c
}

// Expiring is a batch of leases taken off the expiry heap, for one expiry
// command.
type Expiring struct {
	leases []expiring
}

// expiring is one lease of an Expiring batch, and where it was.
type expiring struct {
	slot   uint32
	cookie djinn.ID
}

// Len returns the number of leases in the batch.
func (e Expiring) Len() int { return len(e.leases) }

// Cookies returns the batch's lease cookies, for the expiry command.
func (e Expiring) Cookies() [][]byte {
	out := make([][]byte, len(e.leases))
	for i := range e.leases {
		out[i] = e.leases[i].cookie[:]
	}
	return out
}

// PopExpired takes up to most leases whose expiration is at or before now
// off the expiry heap, and returns them with the earliest expiration left
// on the heap (unix nanos; never if none). Leases renewed since they were
// pushed go back with their new expiration.
func (t *Table) PopExpired(now time.Time, most int) (Expiring, int64) {
	n := now.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	var batch []expiring
	h := &t.byExpiry
	for h.Len() > 0 && len(batch) < most {
		if _, key := h.Min(); key > n {
			break
		}
		slot := h.Pop()
		r := t.recs.At(slot)
		if r.expires > n {
			h.Push(slot, r.expires)
			continue
		}
		batch = append(batch, expiring{slot, r.cookie})
	}
	next := int64(never)
	if h.Len() > 0 {
		_, next = h.Min()
	}
	return Expiring{batch}, next
}

// Requeue puts back on the heap the leases of a batch whose expiry the
// log did not take, those still in the table, to try again.
func (t *Table) Requeue(e Expiring) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range e.leases {
		if t.holds(x.slot, x.cookie) && !t.byExpiry.Has(x.slot) {
			t.byExpiry.Push(x.slot, t.recs.At(x.slot).expires)
		}
	}
}

// DueHorizons returns, for every live lease whose expiration came within
// slack/2 of its logged horizon at now, a new horizon slack past its
// expiration: the checkpoint that keeps renewals from waiting on the log.
func (t *Table) DueHorizons(now time.Time, slack time.Duration) []*statepb.HorizonEntry {
	n := now.UnixNano()
	half := int64(slack / 2)
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*statepb.HorizonEntry
	t.recs.Each(func(_ uint32, r *record) {
		if r.expires == never || r.expires <= n || r.horizon-r.expires >= half {
			return
		}
		c := r.cookie
		out = append(out, &statepb.HorizonEntry{Cookie: c[:], HorizonUnixNanos: horizonOf(r.expires, slack)})
	})
	return out
}

// Wake returns a channel that receives (without blocking the sender) when
// the earliest expiration moves earlier, so the expiry loop can re-arm
// its timer.
func (t *Table) Wake() <-chan struct{} { return t.wake }
