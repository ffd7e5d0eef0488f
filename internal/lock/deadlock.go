package lock

import (
	"fmt"
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
)

// deadlock reports, as an error of kind djinn.Deadlock, whether queuing q in
// set s would close a cycle of waiting (see the package doc): a path of
// waits-for edges from q back to q.
//
// Only a waiting request of q's holder can be waited for through q's
// holder's locks, and those are the only edges into q, so the search is
// for a request, reachable from q, that waits for a lock q's holder holds.
func (t *Table) deadlock(q *waiter, s *set) error {
	if len(q.p.sets) == 0 {
		return nil // nothing can wait for a holder that holds nothing
	}
	via := map[*waiter]*waiter{q: nil}
	stack := []*waiter{q}
	for len(stack) > 0 {
		w := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ws, ahead := s, s.queue()
		if w != q {
			ws = t.sets.at(w.set)
			ahead = ws.queue()[:slices.Index(ws.queue(), w)]
		}
		if t.waitsFor(w, ws, ahead, q.p, func(r *waiter) {
			if _, seen := via[r]; !seen {
				via[r] = w
				stack = append(stack, r)
			}
		}) {
			return deadlockError(q, w, via)
		}
	}
	return nil
}

// waitsFor calls next with each waiting request that w, waiting in set s
// behind the requests ahead, waits for: every waiting request of each
// holder of s whose locks w conflicts with, and, unless w passes the queue
// (a change_mode, or a transaction of a holder's family), the requests
// ahead of it. It stops, reporting true, at a holder that is
// target.
func (t *Table) waitsFor(w *waiter, s *set, ahead []*waiter, target *party, next func(*waiter)) bool {
	for i := range s.holders {
		h := &s.holders[i]
		if committedRelative(h.p, w.p) || !h.conflicts(w.mode) {
			continue
		}
		if h.p == target {
			return true
		}
		for _, r := range h.p.waits() {
			next(r)
		}
	}
	if w.from == 0 && !s.exempt(w.p) {
		for _, r := range ahead {
			next(r)
		}
	}
	return false
}

func deadlockError(q, last *waiter, via map[*waiter]*waiter) error {
	var path []*waiter
	for w := last; w != q; w = via[w] {
		path = append(path, w)
	}
	slices.Reverse(path)
	var b strings.Builder
	fmt.Fprintf(&b, "request %d (%s, %s on lock set %d): waiting would deadlock: it would wait for", q.id, q.p.key, q.mode, q.set)
	for i, w := range path {
		if i > 0 {
			b.WriteString(", which waits for")
		}
		fmt.Fprintf(&b, " request %d (%s, %s on lock set %d)", w.id, w.p.key, w.mode, w.set)
	}
	fmt.Fprintf(&b, ", which waits for %s", q.p.key)
	return djinn.Errorf(djinn.Deadlock, "%s", b.String())
}
