package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

type transferSideJSON struct {
	Address string `json:"address"`
	Created bool   `json:"created"`
	Before  int64  `json:"before"`
	After   int64  `json:"after"`
}

// TestCLIDemoTransfer runs djinn demo transfer between the key/value
// participants of two real servers, in separate processes, under one
// transaction of the first one's manager.
func TestCLIDemoTransfer(t *testing.T) {
	p := newNode(t).start(t)
	defer p.stop(t)
	q := newNode(t).start(t)
	defer q.stop(t)
	var v struct {
		Transaction uint64           `json:"transaction,string"`
		Manager     string           `json:"manager"`
		Amount      int64            `json:"amount"`
		From        transferSideJSON `json:"from"`
		To          transferSideJSON `json:"to"`
	}
	out := mustRun(t, p, "demo", "transfer", "--to", q.addr, "--amount", "30", "-o", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Transaction == 0 || v.Amount != 30 ||
		v.From != (transferSideJSON{p.addr, true, 100, 70}) || v.To != (transferSideJSON{q.addr, true, 100, 130}) {
		t.Fatalf("transfer printed %+v", v)
	}
	tx := strconv.FormatUint(v.Transaction, 10)
	var d txnDescribedJSON
	if err := json.Unmarshal([]byte(mustRun(t, p, "txn", "show", tx, "-o", "json")), &d); err != nil || d.State != "COMMITTED" {
		t.Errorf("state of transaction %s: %s (%v)", tx, d.State, err)
	}
	// Both sides, read by the kv commands outside any transaction.
	if b := strings.TrimSpace(mustRun(t, p, "kv", "get", "balance")); b != "70" {
		t.Errorf("balance at %s: %s, want 70", p.addr, b)
	}
	if b := strings.TrimSpace(mustRun(t, q, "kv", "get", "balance")); b != "130" {
		t.Errorf("balance at %s: %s, want 130", q.addr, b)
	}
	transferMore(t, p, q)
}

// transferMore: text output names both sides; an existing balance is
// kept; too little to move aborts; --from names the payer.
func transferMore(t *testing.T, p, q *proc) {
	text := mustRun(t, p, "demo", "transfer", "--to", q.addr, "--amount", "70")
	for _, want := range []string{"committed", p.addr + "  70 -> 0\n", q.addr + "  130 -> 200\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("transfer printed:\n%s\nwant %q", text, want)
		}
	}
	if _, errs, ok := run(t, p, "demo", "transfer", "--to", q.addr, "--amount", "1"); ok ||
		!strings.Contains(errs, "balance at "+p.addr+" is 0, less than 1") || !strings.Contains(errs, "aborted, nothing moved") {
		t.Errorf("transfer of too much: ok=%v stderr %q", ok, errs)
	}
	if b := strings.TrimSpace(mustRun(t, q, "kv", "get", "balance")); b != "200" {
		t.Errorf("balance at %s after the refused transfer: %s, want 200", q.addr, b)
	}
	text = mustRun(t, p, "demo", "transfer", "--from", q.addr, "--to", p.addr, "--amount", "5")
	if !strings.Contains(text, q.addr+"  200 -> 195\n") || !strings.Contains(text, p.addr+"  0 -> 5\n") {
		t.Errorf("transfer back printed:\n%s", text)
	}
	down := freePort(t) // nothing listens there
	wantErrors(t, p, []errRow{
		{[]string{"demo", "transfer"}, "djinn serve --data-dir d2 --listen 127.0.0.1:4171 --admin 127.0.0.1:4172 --raft 127.0.0.1:4173 --discovery 127.0.0.1:4170"},
		{[]string{"demo", "transfer", "--to", p.addr}, "--from and --to are both " + p.addr},
		{[]string{"demo", "transfer", "--to", q.addr, "--amount", "0"}, "--amount 0"},
		{[]string{"demo", "transfer", "--to", "nowhere"}, "--to"},
		{[]string{"demo", "transfer", "--to", down}, "--to " + down + ": no key/value store answers there"},
	})
}
