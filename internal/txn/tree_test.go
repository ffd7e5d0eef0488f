package txn_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Random trees of nested transactions (issue 3, section 5), up to four
// levels deep, each transaction joined by a few participants that make one
// change under it, then committed or aborted in a random order — children
// before or after their parents — or left open. A simple model says which
// changes must survive: a change counts only if its transaction and every
// transaction above it committed; an aborted ancestor aborts everything
// below. The participants below roll a nested transaction's changes into
// its parent when it commits (TX.2.6), asking the manager about nested
// transactions they have not heard the outcome of when the parent votes, as
// participant.Participant does.

// treeParts are participants of nested transactions: each change lives
// under the transaction it was made in until that commits into its parent,
// or, at the top, for good.
type treeParts struct {
	mu  sync.Mutex
	svc *txn.Service
	// Guarded by mu.
	parent map[uint64]uint64
	kids   map[uint64][]uint64
	veto   map[uint64]string // a participant that votes ABORTED on the transaction
	// changes holds each participant's changes by the transaction they
	// live under.
	changes  map[string]map[uint64][]string
	done     map[string]map[uint64]djinnpb.TransactionState // how the transaction ended here
	why      map[string]map[uint64]string                   // for ABORTED: "abort", "vote" or "ancestor"
	prepared map[string]map[uint64]bool
	final    map[string]bool // changes committed at the top
	bad      []string
}

var _ txn.BlockingParticipants = (*treeParts)(nil)

func newTreeParts() *treeParts {
	return &treeParts{parent: map[uint64]uint64{}, kids: map[uint64][]uint64{}, veto: map[uint64]string{},
		changes: map[string]map[uint64][]string{}, done: map[string]map[uint64]djinnpb.TransactionState{},
		why: map[string]map[uint64]string{}, prepared: map[string]map[uint64]bool{}, final: map[string]bool{}}
}

func (tp *treeParts) of(p string) {
	if tp.changes[p] == nil {
		tp.changes[p] = map[uint64][]string{}
		tp.done[p] = map[uint64]djinnpb.TransactionState{}
		tp.why[p] = map[uint64]string{}
		tp.prepared[p] = map[uint64]bool{}
	}
}

// change records participant p's change under transaction id.
func (tp *treeParts) change(p string, id uint64, c string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.of(p)
	tp.changes[p][id] = append(tp.changes[p][id], c)
}

// dropLocked rolls back p's changes under id and below.
func (tp *treeParts) dropLocked(p string, id uint64, why string) {
	for _, c := range tp.kids[id] {
		if _, ok := tp.done[p][c]; !ok {
			tp.dropLocked(p, c, "ancestor")
		}
	}
	delete(tp.changes[p], id)
	tp.done[p][id], tp.why[p][id] = txn.Aborted, why
}

// settleKidsLocked settles the nested transactions of id that p has not
// heard the outcome of, deepest first, as the manager says: a committed
// one rolls its changes into id, any other rolls back.
func (tp *treeParts) settleKidsLocked(p string, id uint64) {
	for _, c := range tp.kids[id] {
		if _, ok := tp.done[p][c]; ok {
			continue
		}
		tp.settleKidsLocked(p, c)
		st, err := tp.svc.GetState(context.Background(), c, txn.SecretOf(tp.svc, c))
		if err == nil && st == txn.Committed {
			tp.changes[p][id] = append(tp.changes[p][id], tp.changes[p][c]...)
			delete(tp.changes[p], c)
			tp.done[p][c] = txn.Committed
		} else if len(tp.changes[p][c]) > 0 {
			tp.dropLocked(p, c, "ancestor")
		}
	}
}

func (tp *treeParts) vote(p string, id uint64, andCommit bool) (djinnpb.TransactionState, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.of(p)
	if st, ok := tp.done[p][id]; ok {
		return st, nil
	}
	if tp.prepared[p][id] {
		if andCommit {
			tp.rollForwardLocked(p, id)
			return txn.Committed, nil
		}
		return txn.Prepared, nil
	}
	tp.settleKidsLocked(p, id)
	switch {
	case tp.veto[id] == p:
		tp.dropLocked(p, id, "vote")
		return txn.Aborted, nil
	case len(tp.changes[p][id]) == 0:
		tp.done[p][id] = txn.NotChanged
		return txn.NotChanged, nil
	}
	tp.prepared[p][id] = true
	if andCommit {
		tp.rollForwardLocked(p, id)
		return txn.Committed, nil
	}
	return txn.Prepared, nil
}

// rollForwardLocked commits p's changes under id into id's parent, or for
// good at the top.
func (tp *treeParts) rollForwardLocked(p string, id uint64) {
	if par := tp.parent[id]; par != 0 {
		tp.changes[p][par] = append(tp.changes[p][par], tp.changes[p][id]...)
	} else {
		for _, c := range tp.changes[p][id] {
			tp.final[c] = true
		}
	}
	delete(tp.changes[p], id)
	tp.done[p][id] = txn.Committed
}

func (tp *treeParts) Prepare(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) (djinnpb.TransactionState, error) {
	return tp.vote(name(ref), id, false)
}

func (tp *treeParts) PrepareAndCommit(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) (djinnpb.TransactionState, error) {
	return tp.vote(name(ref), id, true)
}

func (tp *treeParts) Commit(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) error {
	p := name(ref)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.of(p)
	switch st, ok := tp.done[p][id]; {
	case ok && st == txn.Committed:
		return nil
	case ok && st == txn.Aborted && tp.why[p][id] == "ancestor":
		return nil // its parent aborted here first: nothing to roll into
	case ok:
		tp.bad = append(tp.bad, fmt.Sprintf("participant %s, transaction %d: told to commit after it was %s (%s)", p, id, stateName(st), tp.why[p][id]))
		return djinn.Errorf(djinn.CannotCommit, "transaction %d: %s", id, stateName(st))
	case !tp.prepared[p][id]:
		tp.bad = append(tp.bad, fmt.Sprintf("participant %s, transaction %d: told to commit before it prepared", p, id))
		return djinn.Errorf(djinn.UnknownTransaction, "transaction %d: not prepared", id)
	}
	tp.rollForwardLocked(p, id)
	return nil
}

func (tp *treeParts) Abort(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) error {
	p := name(ref)
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.of(p)
	switch st, ok := tp.done[p][id]; {
	case ok && st == txn.Committed:
		tp.bad = append(tp.bad, fmt.Sprintf("participant %s, transaction %d: told to abort after it committed", p, id))
		return djinn.Errorf(djinn.CannotAbort, "transaction %d: committed", id)
	case ok:
		return nil
	}
	tp.dropLocked(p, id, "abort")
	return nil
}

// treeNode is a transaction of a tree, as the model sees it.
type treeNode struct {
	id     uint64
	parent *treeNode
	kids   []*treeNode
	level  int
	parts  []string
	veto   string
	state  djinnpb.TransactionState // the model's
}

// abortOpen aborts n and its descendants still ACTIVE (TX.2.7).
func (n *treeNode) abortOpen() {
	if n.state == txn.Active {
		n.state = txn.Aborted
	}
	for _, k := range n.kids {
		if k.state == txn.Active {
			k.abortOpen()
		}
	}
}

// counts reports whether a change made under n survives: n and every
// transaction above it committed.
func (n *treeNode) counts() bool {
	for ; n != nil; n = n.parent {
		if n.state != txn.Committed {
			return false
		}
	}
	return true
}

func TestNestedTreesAgainstModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := newTreeParts()
		log := statetest.For(newTxnState)
		lessor := lease.NewLessor(log.M.Leases, log, lease.Config{Slack: 10 * time.Second})
		self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: log.M.ServiceID(), Object: djinn.ID{'t'}}
		svc, err := txn.New(log.State, lessor, log, time.Now, func() djinn.Ref { return self }, sweepConfig(txn.Blocking(tp)))
		if err != nil {
			t.Fatal(err)
		}
		tp.svc = svc
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); lessor.Run(ctx) }()
		go func() { defer wg.Done(); svc.Run(ctx) }()
		defer func() { cancel(); wg.Wait() }()
		synctest.Wait()

		rng := rand.New(rand.NewPCG(4, 4))
		pool := []string{"a", "b", "c", "d"}
		bg := context.Background()
		var nodes, levels, committedLeaves int
		for tree := range 200 {
			// Grow a tree, creating and joining as it grows.
			var all []*treeNode
			var grow func(parent *treeNode, level int) *treeNode
			grow = func(parent *treeNode, level int) *treeNode {
				var pid uint64
				if parent != nil {
					pid = parent.id
				}
				c, err := svc.CreateNested(bg, pid, txn.SecretOf(svc, pid), time.Hour)
				if err != nil {
					t.Fatalf("tree %d: create under %d: %v", tree, pid, err)
				}
				n := &treeNode{id: c.ID, parent: parent, level: level, state: txn.Active}
				all = append(all, n)
				tp.mu.Lock()
				tp.parent[n.id] = pid
				if pid != 0 {
					tp.kids[pid] = append(tp.kids[pid], n.id)
				}
				tp.mu.Unlock()
				for _, i := range rng.Perm(len(pool))[:rng.IntN(4)] {
					p := pool[i]
					n.parts = append(n.parts, p)
					tp.change(p, n.id, fmt.Sprintf("%d/%s", n.id, p))
					if err := svc.Join(bg, n.id, txn.SecretOf(svc, n.id), part(p), 1); err != nil {
						t.Fatalf("tree %d: join %s to %d: %v", tree, p, n.id, err)
					}
				}
				if len(n.parts) > 0 && rng.IntN(7) == 0 {
					n.veto = n.parts[rng.IntN(len(n.parts))]
					tp.mu.Lock()
					tp.veto[n.id] = n.veto
					tp.mu.Unlock()
				}
				if level < 4 {
					for range rng.IntN(4 - level/2) {
						if len(all) < 14 {
							n.kids = append(n.kids, grow(n, level+1))
						}
					}
				}
				levels = max(levels, level)
				return n
			}
			root := grow(nil, 1)
			nodes += len(all)

			// Commit or abort in a random order; some stay open.
			act := func(n *treeNode, commit bool) {
				var err error
				want := djinn.Kind("")
				if commit {
					switch n.state {
					case txn.Active:
						if n.veto != "" {
							n.abortOpen()
							want = djinn.CannotCommit
						} else {
							n.state = txn.Committed
							for _, k := range n.kids {
								k.abortOpen()
							}
						}
					case txn.Aborted:
						want = djinn.CannotCommit
					}
					var wait *time.Duration
					if rng.IntN(2) == 0 {
						wait = dur(time.Minute)
					}
					err = svc.Commit(bg, n.id, wait)
				} else {
					switch n.state {
					case txn.Active:
						n.abortOpen()
					case txn.Committed:
						want = djinn.CannotAbort
					}
					err = svc.Abort(bg, n.id, nil)
				}
				if djinn.KindOf(err) != want {
					t.Fatalf("tree %d: %s of %d (level %d, model %s): %v, want %q", tree, map[bool]string{true: "commit", false: "abort"}[commit], n.id, n.level, stateName(n.state), err, want)
				}
			}
			for _, i := range rng.Perm(len(all)) {
				if rng.IntN(6) != 0 {
					act(all[i], rng.IntN(10) < 7)
				}
			}
			if root.state == txn.Active {
				act(root, rng.IntN(10) < 7)
			}
			time.Sleep(time.Minute)
			synctest.Wait()

			// The manager agrees with the model, every participant has been
			// told, and exactly the changes that should survive did.
			want := map[string]bool{}
			for _, n := range all {
				in, err := log.State.Get(n.id)
				if err != nil || in.State != n.state {
					t.Fatalf("tree %d: transaction %d (level %d): manager %v %v, model %s\n%s", tree, n.id, n.level, stateName(in.State), err, stateName(n.state), treeString(root))
				}
				for _, p := range in.Parts {
					if !p.Notified {
						t.Fatalf("tree %d: transaction %d: participant %s never told the outcome", tree, n.id, name(p.Ref))
					}
				}
				if n.counts() {
					for _, p := range n.parts {
						want[fmt.Sprintf("%d/%s", n.id, p)] = true
					}
					if len(n.kids) == 0 {
						committedLeaves++
					}
				}
			}
			tp.mu.Lock()
			for _, n := range all {
				for p, m := range tp.changes {
					if cs := m[n.id]; len(cs) > 0 {
						t.Errorf("tree %d: participant %s still holds %v under transaction %d, %s", tree, p, cs, n.id, stateName(n.state))
					}
				}
			}
			inTree := map[uint64]bool{}
			for _, n := range all {
				inTree[n.id] = true
			}
			got := map[string]bool{}
			for c := range tp.final {
				var id uint64
				fmt.Sscanf(c, "%d/", &id)
				if inTree[id] {
					got[c] = true
				}
			}
			bad := slices.Clone(tp.bad)
			tp.mu.Unlock()
			for _, b := range bad {
				t.Error(b)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("tree %d: committed changes %v, the model says %v\n%s", tree, sortedKeys(got), sortedKeys(want), treeString(root))
			}
		}
		if levels < 4 || committedLeaves == 0 {
			t.Fatalf("the trees should reach 4 levels and commit some leaves: %d levels, %d leaves committed", levels, committedLeaves)
		}
		t.Logf("200 trees, %d transactions, %d leaves committed for good", nodes, committedLeaves)
	})
}

func sortedKeys(m map[string]bool) []string {
	out := slices.Collect(maps.Keys(m))
	sort.Strings(out)
	return out
}

func treeString(n *treeNode) string {
	var b strings.Builder
	var walk func(n *treeNode)
	walk = func(n *treeNode) {
		fmt.Fprintf(&b, "%s%d %s parts %v veto %q\n", strings.Repeat("  ", n.level-1), n.id, stateName(n.state), n.parts, n.veto)
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(n)
	return b.String()
}
