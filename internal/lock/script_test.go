package lock_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestScripts runs the lock protocol scripts, testdata/*.txt (the fuzz
// corpus beside them is no script): the commands the lock service logs, applied to its replicated state, each
// followed by what it answered, which waiting requests it granted, and the
// set after it. Rewrite the expected output with -rewrite.
func TestScripts(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scripts under testdata: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) { runScript(t, path) })
	}
}

func runScript(t *testing.T, path string) {
	w := &lockWorld{log: statetest.For(newLockState), names: map[djinn.ID]string{}, reqs: map[uint64]string{}}
	w.log.State.SetNotify(func(evs []lock.Event) {
		for _, ev := range evs {
			if ev.Waits == nil { // that a request waits, its lock's answer says
				w.events = append(w.events, ev)
			}
		}
	})
	datadriven.RunTest(t, path, w.run)
}

// lockWorld is the lock service's state over a log. Sets and owners are
// named in scripts; a name's bytes are the set's id or the owner's lease
// cookie. Transactions are numbers of one scriptManager.
type lockWorld struct {
	log    statetest.Service[*lock.State]
	names  map[djinn.ID]string
	reqs   map[uint64]string // request id: who asked
	events []lock.Event      // grants and failures of waiting requests
}

var scriptManager = &djinnpb.Ref{Endpoint: "127.0.0.1:4161", ServiceId: make([]byte, 16), ObjectId: []byte("txn\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")}

func (w *lockWorld) id(name string) []byte {
	var c djinn.ID
	copy(c[:], name)
	w.names[c] = name
	return c[:]
}

func (w *lockWorld) propose(cmd *statepb.Command) (any, error) {
	return w.log.Propose(context.Background(), cmd)
}

// holder is the request's holder: owner=NAME, or txn=N with its
// ancestors (in=(parent, grandparent)).
func (w *lockWorld) holder(t *testing.T, d *datadriven.TestData) (*statepb.LockHolderState, string) {
	if d.HasArg("owner") {
		var n string
		d.ScanArgs(t, "owner", &n)
		return &statepb.LockHolderState{Owner: w.id(n)}, n
	}
	var id uint64
	var in []uint64
	d.ScanArgs(t, "txn", &id)
	if d.HasArg("in") {
		d.ScanArgs(t, "in", &in)
	}
	h := &statepb.LockHolderState{Manager: scriptManager, Txn: id, AncestorIds: in}
	for range in {
		h.AncestorManagers = append(h.AncestorManagers, scriptManager)
	}
	return h, fmt.Sprintf("txn %d", id)
}

func mode(t *testing.T, d *datadriven.TestData, key string) int32 {
	var s string
	d.ScanArgs(t, key, &s)
	m, err := lock.ParseMode(s)
	if err != nil {
		d.Fatalf(t, "%s=%s: %v", key, s, err)
	}
	return int32(m)
}

func (w *lockWorld) run(t *testing.T, d *datadriven.TestData) string {
	var set string
	if d.HasArg("set") {
		d.ScanArgs(t, "set", &set)
	}
	hour := time.Now().Add(time.Hour).UnixNano()
	var res any
	var err error
	switch d.Cmd {
	case "create-set":
		c := &statepb.LockCreateSet{SetId: w.id(set), Cookie: w.id(set + "-lease"), ExpiresUnixNanos: hour, HorizonUnixNanos: hour, Transactional: d.HasArg("transactional")}
		if d.HasArg("related") {
			var r string
			d.ScanArgs(t, "related", &r)
			c.Related = w.id(r)
		}
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockCreateSet{LockCreateSet: c}})
	case "create-owner":
		var n string
		d.ScanArgs(t, "owner", &n)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockCreateOwner{LockCreateOwner: &statepb.LockCreateOwner{Cookie: w.id(n), ExpiresUnixNanos: hour, HorizonUnixNanos: hour}}})
	case "lock", "try", "change":
		res, err = w.acquire(t, d, set)
	case "unlock":
		h, _ := w.holder(t, d)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockRelease{LockRelease: &statepb.LockRelease{SetId: w.id(set), Holder: h, Mode: mode(t, d, "mode")}}})
	case "cancel":
		// A caller that gave up names its holder; the service's cancel
		// of a request nobody came back for names none.
		var req uint64
		d.ScanArgs(t, "req", &req)
		c := &statepb.LockCancel{RequestIds: []uint64{req}}
		if d.HasArg("owner") || d.HasArg("txn") {
			c.Holder, _ = w.holder(t, d)
		}
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockCancel{LockCancel: c}})
	case "txn-ends":
		var id uint64
		d.ScanArgs(t, "txn", &id)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockTxnEnd{LockTxnEnd: &statepb.LockTxnEnd{Manager: scriptManager, Txn: id, Commit: d.HasArg("commit")}}})
	case "drop":
		var id uint64
		d.ScanArgs(t, "txn", &id)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LockDrop{LockDrop: &statepb.LockDrop{SetId: w.id(set), Manager: scriptManager, Txn: id}}})
	case "lease-ends":
		var n string
		d.ScanArgs(t, "of", &n)
		_, err = w.propose(&statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: [][]byte{w.id(n)}}}})
	case "show":
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return w.answer(res, err) + w.show(set)
}

func (w *lockWorld) acquire(t *testing.T, d *datadriven.TestData, set string) (any, error) {
	var req uint64
	d.ScanArgs(t, "req", &req)
	h, who := w.holder(t, d)
	c := &statepb.LockAcquire{SetId: w.id(set), Holder: h, Mode: mode(t, d, "mode"), RequestId: req, Try: d.Cmd == "try"}
	if d.Cmd == "change" {
		c.From = mode(t, d, "from")
	}
	w.reqs[req] = who
	return w.propose(&statepb.Command{Op: &statepb.Command_LockAcquire{LockAcquire: c}})
}

// answer prints what the command answered and what it did to waiting
// requests.
func (w *lockWorld) answer(res any, err error) string {
	var b strings.Builder
	switch r := res.(type) {
	case lock.Result:
		switch r.Outcome {
		case lock.Granted:
			fmt.Fprintf(&b, "granted, fence %d\n", r.Fence)
		case lock.Queued:
			b.WriteString("queued\n")
		case lock.Refused:
			b.WriteString("refused: not granted at once (try)\n")
		}
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	for _, e := range w.events {
		if e.Err != nil {
			fmt.Fprintf(&b, "request %d (%s) fails: %v\n", e.Request, w.reqs[e.Request], e.Err)
		} else {
			fmt.Fprintf(&b, "request %d (%s) granted, fence %d\n", e.Request, w.reqs[e.Request], e.Fence)
		}
	}
	w.events = nil
	return b.String()
}

// show prints a set: its holders with their locks, then its queue.
func (w *lockWorld) show(set string) string {
	if set == "" {
		return ""
	}
	v, err := w.log.State.Describe(w.id(set))
	if err != nil {
		return fmt.Sprintf("%s: %v", set, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", set)
	if v.Transactional {
		b.WriteString(" transactional,")
	}
	fmt.Fprintf(&b, " last fence %d", v.Fence)
	var holders []string
	for _, h := range v.Holders {
		var locks []string
		for _, l := range h.Locks {
			locks = append(locks, fmt.Sprintf("%s(%d)", l.Mode, l.Fence))
		}
		holders = append(holders, fmt.Sprintf("\n  %s holds %s", w.holderName(h), strings.Join(locks, " ")))
	}
	slices.Sort(holders)
	b.WriteString(strings.Join(holders, ""))
	for _, q := range v.Waiters {
		change := ""
		if q.From != 0 {
			change = fmt.Sprintf(" (from %s)", q.From)
		}
		fmt.Fprintf(&b, "\n  waiting: request %d, %s wants %s%s", q.Request, w.holderName(q.HolderView), q.Mode, change)
	}
	return b.String()
}

func (w *lockWorld) holderName(h lock.HolderView) string {
	if h.IsTxn {
		return fmt.Sprintf("txn %d", h.Txn.ID)
	}
	return w.names[h.Owner]
}
