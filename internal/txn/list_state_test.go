package txn_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// lister drives a transaction manager's replicated state straight, for
// tests of its listing.
type lister struct {
	tb      fataler
	log     statetest.Service[*txn.State]
	cookies uint64
}

// fataler is what lister needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func newLister(tb fataler) *lister {
	return &lister{tb: tb, log: statetest.For(newTxnState)}
}

// create creates a transaction of principal, nested in parent (0: none),
// and returns its id (0: refused, its parent no longer ACTIVE).
func (l *lister) create(principal string, parent uint64) uint64 {
	l.tb.Helper()
	l.cookies++
	var cookie [16]byte
	binary.BigEndian.PutUint64(cookie[8:], l.cookies)
	const exp = math.MaxInt64 / 2
	in, err := l.log.State.ApplyCreate(&statepb.TxnCreate{Cookie: cookie[:], Principal: principal, ParentId: parent, ExpiresUnixNanos: exp, HorizonUnixNanos: exp})
	if err != nil {
		if parent != 0 {
			return 0
		}
		l.tb.Fatalf("create for %s: %v", principal, err)
	}
	return in.ID
}

// abort aborts transaction id, which settles it (it has no participants).
func (l *lister) abort(id uint64) {
	l.tb.Helper()
	if _, err := l.log.State.ApplyDecide(1, &statepb.TxnDecide{Id: id}); err != nil {
		l.tb.Fatalf("abort %d: %v", id, err)
	}
}

// restart snapshots the state and restores it into a new one.
func (l *lister) restart() {
	l.tb.Helper()
	log, err := statetest.Restart(l.log.Log, newTxnState)
	if err != nil {
		l.tb.Fatalf("restart: %v", err)
	}
	l.log = log
}

// snapshot is a state's transactions, as a snapshot holds them.
type snapshot struct {
	counter *statepb.TxnCounter
	records []*statepb.TxnRecord
}

func (l *lister) save() *snapshot {
	c, rs := l.log.State.Records()
	return &snapshot{c, rs}
}

// reload empties the state and restores s into it, records in reverse
// order: what a member behind the others does with a leader's snapshot.
func (l *lister) reload(s *snapshot) {
	l.tb.Helper()
	st := l.log.State
	st.Reset()
	st.RestoreCounter(s.counter)
	for _, r := range slices.Backward(s.records) {
		if err := st.Restore(r); err != nil {
			l.tb.Fatalf("restore %d: %v", r.GetId(), err)
		}
	}
	if err := st.Restored(); err != nil {
		l.tb.Fatalf("restored: %v", err)
	}
}

// want returns principal's transactions in state (0: any), by id, as
// every transaction's listing has them.
func want(st *txn.State, principal string, state djinnpb.TransactionState) []uint64 {
	var out []uint64
	for _, in := range txn.AllTransactions(st) {
		if in.Principal == principal && (state == 0 || in.State == state) {
			out = append(out, in.ID)
		}
	}
	slices.Sort(out)
	return out
}

// every returns every principal's transactions in state (0: any), by
// id, as the listing of all of them has them.
func every(st *txn.State, state djinnpb.TransactionState) []uint64 {
	var out []uint64
	for _, in := range txn.AllTransactions(st) {
		if state == 0 || in.State == state {
			out = append(out, in.ID)
		}
	}
	return out
}

// pageAll lists principal's transactions in state page after page of at
// most limit, checking each page as a client pages (a next only with a
// page, and past the page and its after), and returns their ids and the
// pages it took.
func pageAll(tb fataler, st *txn.State, principal string, state djinnpb.TransactionState, limit int) (ids []uint64, pages int) {
	tb.Helper()
	return pageWith(tb, principal, limit, func(after uint64) ([]txn.Info, uint64) { return st.List(principal, after, limit, state) })
}

// pageEvery is pageAll over every principal's transactions (ListEvery).
func pageEvery(tb fataler, st *txn.State, state djinnpb.TransactionState, limit int) (ids []uint64, pages int) {
	tb.Helper()
	return pageWith(tb, "every principal", limit, func(after uint64) ([]txn.Info, uint64) { return st.ListEvery(after, limit, state) })
}

// pageWith is pageAll's work, its pages listed by list.
func pageWith(tb fataler, principal string, limit int, list func(after uint64) ([]txn.Info, uint64)) (ids []uint64, pages int) {
	tb.Helper()
	for after := uint64(0); ; {
		ins, next := list(after)
		pages++
		if len(ins) > limit {
			tb.Fatalf("%s after %d: a page of %d, past the limit %d", principal, after, len(ins), limit)
		}
		for _, in := range ins {
			if in.ID <= after || (len(ids) > 0 && in.ID <= ids[len(ids)-1]) {
				tb.Fatalf("%s after %d: transaction %d out of order (the last %v)", principal, after, in.ID, ids)
			}
			ids = append(ids, in.ID)
		}
		if next == 0 {
			return ids, pages
		}
		if len(ins) == 0 || next < ins[len(ins)-1].ID || next <= after {
			tb.Fatalf("%s after %d: a page of %d with next %d: want a next only with a page, at or past its last id", principal, after, len(ins), next)
		}
		after = next
	}
}

// TestListReadsOnlyTheCallersTransactions (trust: one principal's load
// never starves another's): a page of a principal's transactions looks at
// that principal's alone, the page's and the one past it — before, and
// after a restart restored them from a snapshot. Before, every page looked
// at every transaction of every principal, with the state locked that
// every transaction call waits for: 85 ms a page with another's million
// remembered (BenchmarkListPageAmongOthers).
func TestListReadsOnlyTheCallersTransactions(t *testing.T) {
	l := newLister(t)
	var mine []uint64
	for i := range 20_000 {
		if i%2000 == 1000 {
			mine = append(mine, l.create("cn:me", 0))
			continue
		}
		l.abort(l.create("cn:other", 0))
	}
	for _, restarted := range []bool{false, true} {
		if restarted {
			l.restart()
		}
		st := l.log.State
		before, _ := st.ListVisits()
		got, pages := pageAll(t, st, "cn:me", 0, 3)
		if !slices.Equal(got, mine) {
			t.Fatalf("restarted %v: listed %v, want %v", restarted, got, mine)
		}
		if v, _ := st.ListVisits(); v-before > len(mine)+pages {
			t.Fatalf("restarted %v: %d pages of %d transactions looked at %d, want at most %d (each, and one past a page)", restarted, pages, len(mine), v-before, len(mine)+pages)
		}
		if ins, next := st.List("cn:nobody", 0, 1000, 0); len(ins) != 0 || next != 0 {
			t.Fatalf("restarted %v: a principal with none listed %d, next %d", restarted, len(ins), next)
		}
	}
}

// TestListSkipsInBoundedSteps: listing a state few of a principal's many
// transactions are in skips the others at most ListSkips with the state
// locked once: a page ends with what it found when that runs out, its
// next the last skipped, and one that found none yet unlocks the state
// and carries on — never an empty page with a next, which a client
// refuses.
func TestListSkipsInBoundedSteps(t *testing.T) {
	l := newLister(t)
	skips := txn.ListSkips()
	first := l.create("cn:me", 0)
	for range 3 * skips {
		l.abort(l.create("cn:me", 0))
	}
	last := l.create("cn:me", 0)
	st := l.log.State

	ins, next := st.List("cn:me", 0, 10, txn.Active)
	if len(ins) != 1 || ins[0].ID != first || next <= first {
		t.Fatalf("first page of ACTIVE: %d, next %d; want transaction %d and a next past it", len(ins), next, first)
	}
	ins, next = st.List("cn:me", next, 10, txn.Active)
	if len(ins) != 1 || ins[0].ID != last || next != 0 {
		t.Fatalf("second page of ACTIVE: %d, next %d; want transaction %d, no next", len(ins), next, last)
	}
	if _, held := st.ListVisits(); held > 10+skips+1 {
		t.Fatalf("looked at %d transactions with the state locked once, want at most %d (a page of 10, %d skipped, one past)", held, 10+skips+1, skips)
	}
	if ins, next := st.List("cn:me", last, 10, txn.Active); len(ins) != 0 || next != 0 {
		t.Fatalf("past the last: %d, next %d; want none", len(ins), next)
	}
	got, _ := pageAll(t, st, "cn:me", txn.Aborted, 1000)
	if !slices.Equal(got, want(st, "cn:me", txn.Aborted)) {
		t.Fatalf("ABORTED listed %d, want the %d", len(got), 3*skips)
	}
}

// TestListPagesMatchAllTransactions: under random creates (nested or
// not, of a few principals), votes, aborts, commits, forgets, restarts
// from a snapshot and snapshots restored over the state, every principal's pages in every state, of any limit,
// list by id just the transactions the listing of all of them has, and
// look at none of another principal's; so do the pages of every
// principal's (ListEvery, an operator's), whose counts are their totals;
// and Highest has the highest ids first. ListSkips and the walk's step are made
// small, so pages end on them and lock the state more than once, each
// time for at most a page, one past it and the skips (or a step).
func TestListPagesMatchAllTransactions(t *testing.T) {
	principals := []string{"cn:a", "cn:b", "cn:c"}
	states := []djinnpb.TransactionState{0, txn.Active, txn.Voting, txn.Committed, txn.Aborted}
	rapid.Check(t, func(rt *rapid.T) {
		skips, step := rapid.IntRange(1, 4).Draw(rt, "skips"), rapid.IntRange(1, 4).Draw(rt, "step")
		txn.SetListSkips(t, skips)
		txn.SetWalkStep(t, step)
		l := newLister(rt)
		var ids []uint64 // every transaction created
		var (
			saved    *snapshot
			savedIDs []uint64
		)
		pick := func() uint64 { return rapid.SampledFrom(ids).Draw(rt, "id") }
		rt.Repeat(map[string]func(*rapid.T){
			"create": func(rt *rapid.T) {
				parent := uint64(0)
				if len(ids) > 0 && rapid.Bool().Draw(rt, "nested") {
					parent = pick()
				}
				if id := l.create(rapid.SampledFrom(principals).Draw(rt, "principal"), parent); id != 0 {
					ids = append(ids, id)
				}
			},
			"vote": func(rt *rapid.T) {
				if len(ids) > 0 {
					_, _ = l.log.State.ApplyVoting(&statepb.TxnVoting{Id: pick()})
				}
			},
			"decide": func(rt *rapid.T) {
				if len(ids) > 0 {
					_, _ = l.log.State.ApplyDecide(1, &statepb.TxnDecide{Id: pick(), Commit: rapid.Bool().Draw(rt, "commit")})
				}
			},
			"forget": func(rt *rapid.T) {
				settled := l.log.State.Settled(math.MaxInt64, 0, math.MaxInt)
				if len(settled) > 0 {
					n := rapid.IntRange(1, len(settled)).Draw(rt, "forget")
					l.log.State.ApplyForget(&statepb.TxnForget{Ids: settled[:n]})
				}
			},
			"restart": func(rt *rapid.T) { l.restart() },
			"save":    func(rt *rapid.T) { saved, savedIDs = l.save(), slices.Clone(ids) },
			"reload": func(rt *rapid.T) {
				if saved != nil {
					l.reload(saved)
					ids = slices.Clone(savedIDs)
				}
			},
			"": func(rt *rapid.T) {
				st := l.log.State
				for _, p := range principals {
					owned := len(want(st, p, 0))
					for _, s := range states {
						limit := rapid.IntRange(1, 5).Draw(rt, "limit")
						before, _ := st.ListVisits()
						got, pages := pageAll(rt, st, p, s, limit)
						if w := want(st, p, s); !slices.Equal(got, w) {
							rt.Fatalf("%s in %v by %d: listed %v, want %v", p, s, limit, got, w)
						}
						if v, _ := st.ListVisits(); v-before > owned+pages {
							rt.Fatalf("%s in %v by %d: %d pages looked at %d transactions, want at most its %d and one a page", p, s, limit, pages, v-before, owned)
						}
					}
				}
				// Every principal's, as an operator lists them: pages,
				// totals, and the highest ids first as the console shows them,
				// each with the state locked for a bounded number at a
				// time.
				all := every(st, 0)
				for _, s := range states {
					limit := rapid.IntRange(1, 5).Draw(rt, "limit")
					txn.ResetHeldMost(st)
					got, _ := pageEvery(rt, st, s, limit)
					if w := every(st, s); !slices.Equal(got, w) {
						rt.Fatalf("every principal's in %v by %d: listed %v, want %v", s, limit, got, w)
					}
					if n, w := st.CountEvery(s), len(every(st, s)); n != w {
						rt.Fatalf("every principal's in %v: counted %d, want %d", s, n, w)
					}
					for _, p := range principals {
						if n, w := st.Count(p, s), len(want(st, p, s)); n != w {
							rt.Fatalf("%s in %v: counted %d, want %d", p, s, n, w)
						}
					}
					if _, held := st.ListVisits(); held > limit+1+skips {
						rt.Fatalf("every principal's in %v by %d: looked at %d with the state locked once, want at most %d", s, limit, held, limit+1+skips)
					}
				}
				n := rapid.IntRange(0, len(all)+1).Draw(rt, "highest")
				var highest []uint64
				txn.ResetHeldMost(st)
				for _, in := range st.Highest(n) {
					highest = append(highest, in.ID)
				}
				w := slices.Clone(all)
				slices.Reverse(w)
				if w = w[:min(n, len(w))]; !slices.Equal(highest, w) {
					rt.Fatalf("the %d highest: %v, want %v", n, highest, w)
				}
				if _, held := st.ListVisits(); held > step {
					rt.Fatalf("the %d highest: looked at %d with the state locked once, want at most %d", n, held, step)
				}
			},
		})
	})
}

// TestHighestOfReadsThePrincipalsOwn: the console's view for a reader who
// sees its own transactions alone takes the highest of that principal's
// ids, reading none of the others' — which, many more, would otherwise
// fill the view's bound and crowd the reader's own out.
func TestHighestOfReadsThePrincipalsOwn(t *testing.T) {
	l := newLister(t)
	var mine []uint64
	for i := range 5_000 {
		if i%1000 == 500 {
			mine = append(mine, l.create("cn:me", 0))
			continue
		}
		l.create("cn:other", 0)
	}
	st := l.log.State
	slices.Sort(mine)
	slices.Reverse(mine)
	before, _ := st.ListVisits()
	var got []uint64
	for _, in := range st.HighestOf("cn:me", 3) {
		got = append(got, in.ID)
	}
	if !slices.Equal(got, mine[:3]) {
		t.Fatalf("HighestOf(cn:me, 3) = %v, want %v: the principal's own, highest first", got, mine[:3])
	}
	if v, _ := st.ListVisits(); v-before != 3 {
		t.Fatalf("HighestOf(cn:me, 3) looked at %d transactions, want the 3 it answers", v-before)
	}
	if ins := st.HighestOf("cn:nobody", 10); len(ins) != 0 {
		t.Fatalf("HighestOf a principal with none: %d", len(ins))
	}
}
