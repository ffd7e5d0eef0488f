package txn_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestScripts runs the transaction protocol scripts under testdata/: the
// commands the manager logs, applied at explicit times to its replicated
// state, each followed by the transactions after it. Rewrite the expected
// output with -rewrite.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		w := &txnWorld{log: statetest.For(newTxnState), parts: map[string]int{}}
		datadriven.RunTest(t, path, w.run)
	})
}

// txnWorld is the manager's state over a log, at a time given as an
// offset from t0.
type txnWorld struct {
	log   statetest.Service[*txn.State]
	now   time.Duration
	ids   []uint64
	parts map[string]int // participant names, in first-join order
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (w *txnWorld) at() int64 { return t0.Add(w.now).UnixNano() }

func txnCookie(id uint64) []byte {
	c := djinn.ID{'t', 'x'}
	c[15] = byte(id)
	return c[:]
}

func (w *txnWorld) propose(cmd *statepb.Command) error {
	cmd.NowUnixNanos = w.at()
	_, err := w.log.Propose(context.Background(), cmd)
	return err
}

func (w *txnWorld) run(t *testing.T, d *datadriven.TestData) string {
	var id uint64
	if d.HasArg("id") {
		d.ScanArgs(t, "id", &id)
	}
	var err error
	switch d.Cmd {
	case "tick":
		var by time.Duration
		d.ScanArgs(t, "by", &by)
		w.now += by
		return fmt.Sprintf("now %s", w.now)
	case "create":
		err = w.create(t, d, id)
	case "join":
		var name string
		crash := int64(1)
		d.ScanArgs(t, "part", &name)
		d.MaybeScanArgs(t, "crash", &crash)
		if _, ok := w.parts[name]; !ok {
			w.parts[name] = len(w.parts)
		}
		err = w.propose(&statepb.Command{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{Id: id, Participant: part(name), CrashCount: crash}}})
	case "voting":
		err = w.propose(&statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: id}}})
	case "decide":
		err = w.propose(&statepb.Command{Op: &statepb.Command_TxnDecide{TxnDecide: decision(t, d, id)}})
	case "told":
		var i uint32
		d.ScanArgs(t, "part", &i)
		err = w.propose(&statepb.Command{Op: &statepb.Command_TxnNotified{TxnNotified: &statepb.TxnNotified{
			Entries: []*statepb.TxnParticipantRef{{Id: id, Participant: i}}}}})
	case "lease-expires":
		err = w.propose(&statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: [][]byte{txnCookie(id)}}}})
	case "forget":
		err = w.propose(&statepb.Command{Op: &statepb.Command_TxnForget{TxnForget: &statepb.TxnForget{Ids: []uint64{id}}}})
	case "show":
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	shown := w.show(w.family(id))
	if err != nil {
		return fmt.Sprintf("error: %v\n%s", err, shown)
	}
	return shown
}

// family returns id with its parent and nested transactions: what a
// command on id shows (all of them for id 0, the show command).
func (w *txnWorld) family(id uint64) []uint64 {
	if id == 0 {
		return w.ids
	}
	out := []uint64{id}
	if in, err := w.log.State.Get(id); err == nil {
		if in.Parent != 0 {
			out = append(out, in.Parent)
		}
		out = append(out, in.Children...)
	}
	return out
}

func (w *txnWorld) create(t *testing.T, d *datadriven.TestData, id uint64) error {
	var lease time.Duration
	var parent uint64
	d.ScanArgs(t, "lease", &lease)
	d.MaybeScanArgs(t, "parent", &parent)
	exp := t0.Add(w.now + lease).UnixNano()
	w.ids = append(w.ids, id)
	return w.propose(&statepb.Command{Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{
		Id: id, ParentId: parent, Cookie: txnCookie(id), ExpiresUnixNanos: exp, HorizonUnixNanos: exp,
	}}})
}

// decision is the manager's TxnDecide: abort, or commit with the votes
// it collected (votes=(prepared, notchanged, ...), in join order).
func decision(t *testing.T, d *datadriven.TestData, id uint64) *statepb.TxnDecide {
	dec := &statepb.TxnDecide{Id: id, Commit: d.HasArg("commit")}
	if !d.HasArg("votes") {
		return dec
	}
	var votes []string
	d.ScanArgs(t, "votes", &votes)
	for i, v := range votes {
		s := djinnpb.TransactionState(djinnpb.TransactionState_value["TRANSACTION_STATE_"+strings.ToUpper(v)])
		dec.Votes = append(dec.Votes, int32(s))
		if s == txn.Prepared {
			dec.Prepared = append(dec.Prepared, uint32(i))
		}
	}
	return dec
}

// show prints transactions: each one's state, its lease, its family and
// its participants (vote, and whether told the outcome).
func (w *txnWorld) show(ids []uint64) string {
	var lines []string
	for _, id := range ids {
		in, err := w.log.State.Get(id)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%d: forgotten", id))
			continue
		}
		lease := "lease ended"
		if w.log.M.Leases.Alive(djinn.ID(txnCookie(id)), t0.Add(w.now)) {
			lease = "lease alive"
		}
		line := fmt.Sprintf("%d: %s, %s", id, strings.TrimPrefix(in.State.String(), "TRANSACTION_STATE_"), lease)
		if in.Parent != 0 {
			line += fmt.Sprintf(", nested in %d", in.Parent)
		}
		if len(in.Children) > 0 {
			line += fmt.Sprintf(", nests %v", in.Children)
		}
		for _, p := range in.Parts {
			line += "\n  " + w.partLine(p)
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func (w *txnWorld) partLine(p txn.PartInfo) string {
	vote := "no vote"
	if p.Vote != 0 {
		vote = "voted " + strings.TrimPrefix(p.Vote.String(), "TRANSACTION_STATE_")
	}
	told := ""
	if p.Notified {
		told = ", needs no more telling"
	}
	return fmt.Sprintf("%s (crash count %d): %s%s", name(p.Ref), p.Crash, vote, told)
}
