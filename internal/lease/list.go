package lease

import (
	"cmp"
	"slices"
	"time"

	"github.com/djinn-go/djinn"
)

// Listed is one live lease as List shows it.
type Listed struct {
	Cookie    djinn.ID
	Owner     Owner
	Principal string
	Expires   time.Time // djinn.EndOfTime for Forever
}

// List returns every live lease, soonest expiry first. The cookies are
// capabilities: whoever shows them must not show them to just anyone.
func (t *Table) List() []Listed {
	t.mu.Lock()
	out := make([]Listed, 0, t.recs.Len())
	t.recs.Each(func(_ uint32, r *record) {
		out = append(out, Listed{Cookie: r.cookie, Owner: r.owner(), Principal: t.principals[r.principal], Expires: fromNanos(r.expires)})
	})
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Listed) int {
		if c := a.Expires.Compare(b.Expires); c != 0 {
			return c
		}
		return cmp.Compare(string(a.Cookie[:]), string(b.Cookie[:]))
	})
	return out
}
