package main

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

type txnCreatedJSON struct {
	ID      uint64    `json:"id,string"`
	Token   string    `json:"token"`
	Parent  *string   `json:"parent"`
	Manager string    `json:"manager"`
	Lease   leaseJSON `json:"lease"`
}

type txnParticipantJSON struct {
	Participant string  `json:"participant"`
	CrashCount  int64   `json:"crash_count,string"`
	Vote        string  `json:"vote"`
	Notified    bool    `json:"notified"`
	LastError   *string `json:"last_error"`
}

type txnDescribedJSON struct {
	ID           uint64               `json:"id,string"`
	State        string               `json:"state"`
	Parent       *string              `json:"parent"`
	Nested       []string             `json:"nested"`
	Lease        *leaseJSON           `json:"lease"`
	Participants []txnParticipantJSON `json:"participants"`
}

// txnScript is TestCLITxn's state: a transaction with a participant that
// cannot be reached, and one without participants.
type txnScript struct {
	*rig
	a, b     txnCreatedJSON
	aID, bID string
	// tokens are the transactions' tokens (ID.SECRET) by id, as create
	// and nest printed them.
	tokens map[string]string
}

func newTxnScript(t *testing.T) *txnScript {
	return &txnScript{rig: newRig(t), tokens: map[string]string{}}
}

func (s *txnScript) create(lease string) (txnCreatedJSON, string) {
	s.t.Helper()
	var c txnCreatedJSON
	s.json(&c, "txn", "create", "--lease", lease)
	return c, s.record(c)
}

// record keeps a created transaction's token and returns its id.
func (s *txnScript) record(c txnCreatedJSON) string {
	s.t.Helper()
	id := strconv.FormatUint(c.ID, 10)
	if !strings.HasPrefix(c.Token, id+".") || len(c.Token) != len(id)+33 {
		s.t.Fatalf("transaction %s: token %q, want ID.SECRET", id, c.Token)
	}
	s.tokens[id] = c.Token
	return id
}

// state returns transaction id's state: by txn state and its token when
// the script knows it, else as its creator sees it (txn show).
func (s *txnScript) state(id string) string {
	s.t.Helper()
	if tok, ok := s.tokens[id]; ok {
		return strings.TrimSpace(s.must("txn", "state", tok))
	}
	var d txnDescribedJSON
	s.json(&d, "txn", "show", id)
	return d.State
}

// TestCLITxn runs the transaction commands against a real server: create,
// show, state, commit and abort, with the errors of TX.2.5, and ls.
func TestCLITxn(t *testing.T) {
	s := newTxnScript(t)
	s.unreachableParticipant()
	s.abortWaits()
	s.commitEmpty()
	s.errorRows()
	// TX.2.1: cancelling the lease aborts the transaction.
	c, cID := s.create("1h")
	s.must("lease", "cancel", c.Lease.Name)
	if st := s.state(cID); st != "ABORTED" {
		t.Errorf("state after the lease was cancelled %q, want ABORTED", st)
	}
	s.list(c.ID)
}

// unreachableParticipant: a transaction joined, as a participant would
// join it, by a participant that cannot be reached.
func (s *txnScript) unreachableParticipant() {
	t := s.t
	s.a, s.aID = s.create("10m")
	if s.a.ID == 0 || s.a.Parent != nil || !strings.HasPrefix(s.a.Manager, "djinn://") || !strings.HasPrefix(s.a.Lease.Token, "djinn-lease:") {
		t.Fatalf("create printed %+v", s.a)
	}
	part, err := djinn.ParseRef("djinn://" + freePort(t) + "/" + djinn.NewID().String() + "/" + djinn.NewID().String())
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := client.ParseTransactionToken(s.a.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djinnpb.NewTransactionManagerClient(dial(t, s.p.addr)).Join(ctxT(t), &djinnpb.JoinTransactionRequest{
		Id: s.a.ID, Secret: secret[:], Participant: &djinnpb.Ref{Endpoint: part.Endpoint, ServiceId: part.Service[:], ObjectId: part.Object[:]}, CrashCount: 3,
	}); err != nil {
		t.Fatal(err)
	}
	var d txnDescribedJSON
	s.json(&d, "txn", "show", s.aID)
	if d.ID != s.a.ID || d.State != "ACTIVE" || d.Lease == nil || len(d.Participants) != 1 || len(d.Nested) != 0 ||
		d.Participants[0] != (txnParticipantJSON{Participant: part.String(), CrashCount: 3, Vote: "NONE"}) {
		t.Fatalf("show printed %+v", d)
	}
	if text := s.must("txn", "show", s.aID); !strings.Contains(text, "state        ACTIVE") || !strings.Contains(text, "crash=3 vote=NONE notified=false") {
		t.Errorf("show printed:\n%s", text)
	}
	if st := s.state(s.aID); st != "ACTIVE" {
		t.Errorf("state %q, want ACTIVE", st)
	}
}

// abortWaits: the participant cannot be told, so --wait passes, saying how
// the transaction ended and who was not told; the manager keeps trying
// and shows why.
func (s *txnScript) abortWaits() {
	t := s.t
	if _, errs, ok := s.run("txn", "abort", s.aID, "--wait", "100ms"); ok || !strings.Contains(errs, "the transaction aborted") ||
		!strings.Contains(errs, "not told yet") {
		t.Errorf("abort --wait: ok=%v stderr %q", ok, errs)
	}
	if st := s.state(s.aID); st != "ABORTED" {
		t.Errorf("state %q, want ABORTED", st)
	}
	var d txnDescribedJSON
	if !poll(20*time.Second, func() bool {
		s.json(&d, "txn", "show", s.aID)
		return d.State == "ABORTED" && len(d.Participants) == 1 && d.Participants[0].LastError != nil && !d.Participants[0].Notified
	}) {
		t.Errorf("show of the aborted transaction: %+v, want its participant's last error", d)
	}
	if text := s.must("txn", "abort", s.aID); strings.TrimSpace(text) != "aborted" {
		t.Errorf("second abort printed %q", text)
	}
}

// commitEmpty: a transaction without participants commits at once.
func (s *txnScript) commitEmpty() {
	t := s.t
	s.b, s.bID = s.create("1m")
	if s.b.ID == s.a.ID || s.b.Manager != s.a.Manager {
		t.Errorf("second create printed %+v after %+v", s.b, s.a)
	}
	if text := s.must("txn", "commit", s.bID, "--wait", "10s"); strings.TrimSpace(text) != "committed" {
		t.Errorf("commit printed %q", text)
	}
	if st := s.state(s.bID); st != "COMMITTED" {
		t.Errorf("state %q, want COMMITTED", st)
	}
	s.must("txn", "commit", s.bID)
}

func (s *txnScript) errorRows() {
	s.errors([]errRow{
		{[]string{"txn", "commit", s.aID}, "cannot commit: transaction " + s.aID + ": aborted"},
		{[]string{"txn", "abort", s.bID}, "cannot abort: transaction " + s.bID + ": committed"},
		{[]string{"txn", "show", "99999"}, "transaction 99999: unknown"},
		{[]string{"txn", "commit", "99999"}, "transaction 99999: unknown"},
		{[]string{"txn", "state", "0"}, `transaction id "0"`},
		{[]string{"txn", "state", s.aID}, "transaction " + s.aID + ": its id alone does not let one work under it"},
		{[]string{"txn", "state", s.aID + "." + djinn.NewID().String()}, "transaction " + s.aID + ": unknown"},
		{[]string{"txn", "show", "seven"}, `transaction id "seven"`},
		{[]string{"txn", "create", "--lease", "0s"}, "0s"},
		{[]string{"txn", "commit", s.bID, "--wait", "-1s"}, "--wait -1s"},
		{[]string{"txn", "abort", s.aID, "--wait", "soon"}, `--wait "soon"`},
	})
}

// list: ls shows every transaction the manager remembers, by id; --state
// filters; --max bounds.
func (s *txnScript) list(cID uint64) {
	t := s.t
	e, _ := s.create("1h")
	var all []struct {
		ID    uint64 `json:"id,string"`
		State string `json:"state"`
	}
	s.json(&all, "txn", "ls")
	want := map[uint64]string{s.a.ID: "ABORTED", s.b.ID: "COMMITTED", cID: "ABORTED", e.ID: "ACTIVE"}
	got := map[uint64]string{}
	for i, x := range all {
		got[x.ID] = x.State
		if i > 0 && all[i-1].ID >= x.ID {
			t.Errorf("ls: %d listed after %d, want by id", x.ID, all[i-1].ID)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("ls: %v, want %v", got, want)
	}
	s.json(&all, "txn", "ls", "--state", "active")
	if len(all) != 1 || all[0].ID != e.ID {
		t.Errorf("ls --state active: %+v, want only %d", all, e.ID)
	}
	text := s.must("txn", "ls", "--state", "aborted", "--max", "1")
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "ABORTED") {
		t.Errorf("ls --state aborted --max 1 printed %q, want a header and one ABORTED line", text)
	}
	s.errors([]errRow{
		{[]string{"txn", "ls", "--state", "done"}, `--state "done"`},
		{[]string{"txn", "ls", "--max", "-1"}, "--max -1"},
	})
}

// TestCLITxnNest: djinn txn nest creates a transaction nested in another of
// the same manager (TX.2.2), show names the tree, and aborting the parent
// aborts the nested one.
func TestCLITxnNest(t *testing.T) {
	s := newTxnScript(t)
	parent, pID := s.create("10m")
	var child txnCreatedJSON
	s.json(&child, "txn", "nest", parent.Token, "--lease", "10m")
	if child.ID == 0 || child.ID == parent.ID || child.Parent == nil || *child.Parent != pID || child.Manager != parent.Manager ||
		!strings.HasPrefix(child.Lease.Token, "djinn-lease:") || parent.Parent != nil {
		t.Fatalf("nest %s printed %+v (parent %+v)", pID, child, parent)
	}
	cID := s.record(child)
	if text := s.must("txn", "nest", child.Token, "--lease", "1m"); !strings.Contains(text, "nested in   "+cID) {
		t.Errorf("nest printed:\n%s", text)
	}
	var d txnDescribedJSON
	s.json(&d, "txn", "show", cID)
	if d.ID != child.ID || d.State != "ACTIVE" || d.Parent == nil || *d.Parent != pID || len(d.Nested) != 1 {
		t.Fatalf("show %s: %+v, want ACTIVE, nested in %s, with one nested", cID, d, pID)
	}
	grandchild := d.Nested[0]
	d = txnDescribedJSON{}
	s.json(&d, "txn", "show", pID)
	if d.Parent != nil || len(d.Nested) != 1 || d.Nested[0] != cID {
		t.Errorf("show %s: %+v, want top-level with %s nested", pID, d, cID)
	}
	if text := s.must("txn", "show", cID); !strings.Contains(text, "nested in    "+pID) || !strings.Contains(text, "nested       "+grandchild) {
		t.Errorf("show printed:\n%s", text)
	}
	// TX.2.2: aborting a transaction aborts every one nested in it, and
	// nothing can be nested in it any more.
	s.must("txn", "abort", pID, "--wait", "10s")
	for _, id := range []string{pID, cID, grandchild} {
		if st := s.state(id); st != "ABORTED" {
			t.Errorf("state of %s after its parent aborted: %s", id, st)
		}
	}
	s.errors([]errRow{
		{[]string{"txn", "nest", parent.Token, "--lease", "1m"}, "transaction " + pID + ": ABORTED, no longer active"},
		{[]string{"txn", "nest", "99999." + djinn.NewID().String()}, "transaction 99999: unknown"},
		{[]string{"txn", "nest", pID}, "transaction " + pID + ": its id alone does not let one work under it"},
		{[]string{"txn", "nest", "0"}, `transaction id "0"`},
		{[]string{"txn", "nest", child.Token, "--lease", "0s"}, "0s"},
		{[]string{"txn", "nest"}, "accepts 1 arg(s)"},
	})
}
