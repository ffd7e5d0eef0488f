package lock

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
)

// Holder is a client of the lock service (spec 1.2.2): a non-transactional
// lock owner (Txn false) or a transaction. Two holders are the same when Txn
// and ID are equal; owner 7 and transaction 7 are different holders. Ids
// are non-zero and below 2^63.
//
// Lineage is a transaction's ancestors, from its parent up to its top-level
// transaction; it is empty for a top-level transaction and for an owner.
// The table learns a transaction's lineage from the requests that name it
// and refuses a request whose lineage contradicts what it knows. Calls
// other than Acquire identify a holder by Txn and ID alone and do not look
// at Lineage.
type Holder struct {
	Txn     bool
	ID      uint64
	Lineage []uint64
}

// Owner returns the non-transactional holder id.
func Owner(id uint64) Holder { return Holder{ID: id} }

// Txn returns the transaction id nested in lineage (its parent first, its
// top-level transaction last).
func Txn(id uint64, lineage ...uint64) Holder {
	return Holder{Txn: true, ID: id, Lineage: lineage}
}

// String names the holder: "owner 7" or "transaction 4".
func (h Holder) String() string {
	if h.Txn {
		return fmt.Sprintf("transaction %d", h.ID)
	}
	return fmt.Sprintf("owner %d", h.ID)
}

// Family returns the holder's transaction family: its top-level
// transaction, or 0 for an owner.
func (h Holder) Family() uint64 {
	switch {
	case !h.Txn:
		return 0
	case len(h.Lineage) > 0:
		return h.Lineage[len(h.Lineage)-1]
	}
	return h.ID
}

// maxID bounds holder ids: the table keeps a holder's kind in an id's top
// bit.
const maxID = 1<<63 - 1

// checkID checks the holder's id: all that calls other than Acquire look
// at.
func (h Holder) checkID() error {
	if h.ID == 0 || h.ID > maxID {
		return djinn.Errorf(djinn.InvalidArgument, "%s: an id must be non-zero and below 2^63", h)
	}
	return nil
}

// check checks the holder's id and lineage.
func (h Holder) check() error {
	if err := h.checkID(); err != nil {
		return err
	}
	if !h.Txn {
		if len(h.Lineage) > 0 {
			return djinn.Errorf(djinn.InvalidArgument, "owner %d: lineage %v: only a transaction has ancestors", h.ID, h.Lineage)
		}
		return nil
	}
	for i, a := range h.Lineage {
		if a == 0 || a > maxID {
			return djinn.Errorf(djinn.InvalidArgument, "transaction %d: lineage %v: ancestor ids must be non-zero and below 2^63", h.ID, h.Lineage)
		}
		if a == h.ID || slices.Contains(h.Lineage[:i], a) {
			return djinn.Errorf(djinn.InvalidArgument, "transaction %d: lineage %v: repeats transaction %d", h.ID, h.Lineage, a)
		}
	}
	return nil
}

// partyKey identifies a holder: its id, with the top bit set for a
// transaction. Keys order holders as Holders lists them: owners by id,
// then transactions by id.
type partyKey uint64

const txnBit = 1 << 63

func key(h Holder) partyKey {
	if h.Txn {
		return txnKey(h.ID)
	}
	return partyKey(h.ID)
}

func txnKey(id uint64) partyKey { return partyKey(id | txnBit) }

func (k partyKey) txn() bool  { return k&txnBit != 0 }
func (k partyKey) id() uint64 { return uint64(k &^ txnBit) }

func (k partyKey) String() string {
	if k.txn() {
		return fmt.Sprintf("transaction %d", k.id())
	}
	return fmt.Sprintf("owner %d", k.id())
}

// party is a holder the table knows: one that holds a lock, waits for one,
// or is an ancestor of a transaction that does. It is dropped when it is
// none of these. A party fills a 48-byte size class.
type party struct {
	key partyKey
	// up is a transaction's parent (nil for a top-level transaction
	// and an owner); its lineage is the chain of ups.
	up *party
	// sets lists the sets where the party holds locks, in no order; each
	// holding knows its index here.
	sets []uint64
	// more is nil for a party with no waiting requests and no known
	// nested transactions: most of them.
	more *partyMore
}

type partyMore struct {
	waits []*waiter // its waiting requests, by request id
	kids  []*party  // known transactions it is the parent of, by id
}

// lineage returns the ids of p's ancestors, parent first.
func (p *party) lineage() []uint64 {
	var l []uint64
	for a := p.up; a != nil; a = a.up {
		l = append(l, a.key.id())
	}
	return l
}

func (p *party) waits() []*waiter {
	if p.more == nil {
		return nil
	}
	return p.more.waits
}

func (p *party) kids() []*party {
	if p.more == nil {
		return nil
	}
	return p.more.kids
}

func (p *party) holder() Holder {
	return Holder{Txn: p.key.txn(), ID: p.key.id(), Lineage: p.lineage()}
}

// family is the party's top-level transaction, or nil for an owner.
func (p *party) family() *party {
	if !p.key.txn() {
		return nil
	}
	for p.up != nil {
		p = p.up
	}
	return p
}

// idle reports whether the party holds nothing, waits for nothing and has
// no known nested transactions.
func (p *party) idle() bool {
	return len(p.sets) == 0 && p.more == nil
}

// tidy drops more when it holds nothing.
func (p *party) tidy() {
	if m := p.more; m != nil && len(m.waits) == 0 && len(m.kids) == 0 {
		p.more = nil
	}
}

func (p *party) ensureMore() *partyMore {
	if p.more == nil {
		p.more = &partyMore{}
	}
	return p.more
}

func byID(x *waiter, id uint64) int  { return cmp.Compare(x.id, id) }
func byKey(x *party, k partyKey) int { return cmp.Compare(x.key, k) }

func (p *party) addWait(w *waiter) {
	m := p.ensureMore()
	i, _ := slices.BinarySearchFunc(m.waits, w.id, byID)
	m.waits = slices.Insert(m.waits, i, w)
}

func (p *party) removeWait(w *waiter) {
	if m := p.more; m != nil {
		if i, ok := slices.BinarySearchFunc(m.waits, w.id, byID); ok {
			m.waits = slices.Delete(m.waits, i, i+1)
			if len(m.waits) == 0 {
				m.waits = nil
			}
		}
		p.tidy()
	}
}

func (p *party) addKid(k *party) {
	m := p.ensureMore()
	i, _ := slices.BinarySearchFunc(m.kids, k.key, byKey)
	m.kids = slices.Insert(m.kids, i, k)
}

func (p *party) removeKid(k *party) {
	if m := p.more; m != nil {
		if i, ok := slices.BinarySearchFunc(m.kids, k.key, byKey); ok {
			m.kids = slices.Delete(m.kids, i, i+1)
			if len(m.kids) == 0 {
				m.kids = nil
			}
		}
		p.tidy()
	}
}

// committedRelative reports whether holder h is committed relative to
// requester q (spec 1.5): h is q, or h is a transaction and an ancestor of
// q. A committed-relative holder's locks never block q.
func committedRelative(h, q *party) bool {
	for ; q != nil; q = q.up {
		if q == h {
			return true
		}
	}
	return false
}
