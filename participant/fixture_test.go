package participant_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeRes is a Resource whose transactions change what a test says: each
// change is a record; committing one writes it under "app/ID".
type fakeRes struct {
	mu         sync.Mutex
	recs       map[participant.TxKey][]byte // guarded by mu: changed transactions
	prepareErr error                        // guarded by mu
	calls      []string                     // guarded by mu
}

var _ participant.Resource = (*fakeRes)(nil)

func newFakeRes() *fakeRes { return &fakeRes{recs: map[participant.TxKey][]byte{}} }

func (r *fakeRes) note(op string, tx participant.Tx) {
	r.calls = append(r.calls, fmt.Sprintf("%s %d", op, tx.ID))
}

func (r *fakeRes) change(tx participant.Tx, rec string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[tx.Key()] = []byte(rec)
}

func (r *fakeRes) failPrepare(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepareErr = err
}

func (r *fakeRes) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *fakeRes) Prepare(_ context.Context, tx participant.Tx) ([]byte, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("prepare", tx)
	if r.prepareErr != nil {
		return nil, false, r.prepareErr
	}
	rec, ok := r.recs[tx.Key()]
	return rec, ok, nil
}

func (r *fakeRes) Commit(_ context.Context, tx participant.Tx, write func(*participant.Batch) error) error {
	r.mu.Lock()
	r.note("commit", tx)
	rec := r.recs[tx.Key()]
	r.mu.Unlock()
	var b participant.Batch
	b.Put(fmt.Sprintf("app/%d", tx.ID), rec)
	if err := write(&b); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, tx.Key())
	return nil
}

func (r *fakeRes) Abort(_ context.Context, tx participant.Tx) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("abort", tx)
	delete(r.recs, tx.Key())
}

// Merge appends the child's record to the parent's.
func (r *fakeRes) Merge(_ context.Context, child, parent participant.Tx) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("merge %d %d", child.ID, parent.ID))
	if rec, ok := r.recs[child.Key()]; ok {
		r.recs[parent.Key()] = append(r.recs[parent.Key()], rec...)
		delete(r.recs, child.Key())
	}
}

func (r *fakeRes) Recover(tx participant.Tx, rec []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("recover", tx)
	r.recs[tx.Key()] = slices.Clone(rec)
	return nil
}

// fixture is a participant over a MemStore, a fake resource and an
// in-memory manager.
type fixture struct {
	t   *testing.T
	p   *participant.Participant
	mgr *participanttest.Manager
	res *fakeRes
	mem *participant.MemStore
	st  *participanttest.FaultyStore // over mem
	cfg participant.Config
}

func start(t *testing.T, mods ...func(*participant.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, mgr: participanttest.NewManager(), res: newFakeRes(), mem: participant.NewMemStore()}
	f.cfg = participant.Config{Endpoint: "127.0.0.1:7", Resource: f.res, Managers: f.mgr}
	for _, m := range mods {
		m(&f.cfg)
	}
	f.open()
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	f.st = participanttest.NewFaultyStore(f.mem)
	f.cfg.Store = f.st
	p, err := participant.New(f.cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.p = p
	f.t.Cleanup(func() { p.Close() })
}

// restart closes the participant and starts another over the store as a
// restarted process finds it (records kept, new crash count).
func (f *fixture) restart() {
	f.t.Helper()
	f.p.Close()
	f.mem = f.mem.Reopen()
	f.open()
}

// op runs an operation under tx that changes it (rec != "") or only reads.
func (f *fixture) op(tx participant.Tx, rec string) {
	f.t.Helper()
	if err := f.try(tx, rec); err != nil {
		f.t.Fatalf("operation under %d: %v", tx.ID, err)
	}
}

func (f *fixture) try(tx participant.Tx, rec string) error {
	done, err := f.p.Join(context.Background(), tx)
	if err != nil {
		return err
	}
	defer done()
	if rec != "" {
		f.res.change(tx, rec)
	}
	return nil
}

func (f *fixture) prepare(tx participant.Tx) participant.State {
	f.t.Helper()
	v, err := f.p.Prepare(context.Background(), tx)
	if err != nil {
		f.t.Fatalf("prepare %d: %v", tx.ID, err)
	}
	return v
}

func (f *fixture) wantState(tx participant.Tx, want participant.State) {
	f.t.Helper()
	if got, ok := f.p.State(tx); !ok || got != want {
		f.t.Fatalf("transaction %d: state %v (known %v), want %v", tx.ID, got, ok, want)
	}
}

func (f *fixture) wantUnknown(tx participant.Tx) {
	f.t.Helper()
	if got, ok := f.p.State(tx); ok {
		f.t.Fatalf("transaction %d: state %v, want forgotten", tx.ID, got)
	}
}

// keys returns the store's keys under prefix.
func keys(t *testing.T, st participant.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := st.Range(prefix, func(k string, _ []byte) error {
		out = append(out, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// records returns the number of prepared records in the store.
func records(t *testing.T, st participant.Store) int {
	t.Helper()
	return len(keys(t, st, participant.ReservedPrefix+"prepared/"))
}

func wantKind(t *testing.T, err error, k djinn.Kind) {
	t.Helper()
	if djinn.KindOf(err) != k {
		t.Fatalf("error %v (kind %q), want kind %s", err, djinn.KindOf(err), k)
	}
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("resource calls:\n got  %s\n want %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}
