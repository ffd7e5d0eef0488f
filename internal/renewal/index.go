package renewal

import (
	"iter"

	"github.com/djinn-go/djinn"
)

// index finds client leases by key. Cookies are 128 random bits, so it is
// keyed by cookie alone, which takes less than half the memory of a map
// keyed by the whole 48-byte key; the rare lease whose cookie another
// landlord also used lives in a small overflow map under its whole key.
type index struct {
	byCookie map[djinn.ID]*clientLease
	overflow map[Key]*clientLease
}

func newIndex() index {
	return index{byCookie: make(map[djinn.ID]*clientLease), overflow: make(map[Key]*clientLease)}
}

func cookieOf(k Key) djinn.ID { return djinn.ID(k[32:]) }

func (x index) get(k Key) (*clientLease, bool) {
	if c, ok := x.byCookie[cookieOf(k)]; ok && c.key() == k {
		return c, true
	}
	c, ok := x.overflow[k]
	return c, ok
}

func (x index) put(k Key, c *clientLease) {
	if cur, ok := x.byCookie[cookieOf(k)]; ok && cur.key() != k {
		x.overflow[k] = c
		return
	}
	x.byCookie[cookieOf(k)] = c
}

func (x index) del(k Key) {
	cookie := cookieOf(k)
	if c, ok := x.byCookie[cookie]; ok && c.key() == k {
		delete(x.byCookie, cookie)
		for other, c := range x.overflow {
			if cookieOf(other) == cookie {
				delete(x.overflow, other)
				x.byCookie[cookie] = c
				break
			}
		}
		return
	}
	delete(x.overflow, k)
}

func (x index) len() int { return len(x.byCookie) + len(x.overflow) }

func (x index) all() iter.Seq[*clientLease] {
	return func(yield func(*clientLease) bool) {
		for _, c := range x.byCookie {
			if !yield(c) {
				return
			}
		}
		for _, c := range x.overflow {
			if !yield(c) {
				return
			}
		}
	}
}
