package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// What the transaction commands print.

type txnView struct {
	ID string `json:"id"`
	// Token is the transaction's capability, ID.SECRET: what --txn, txn
	// state and txn nest take to work under it.
	Token   string    `json:"token"`
	Parent  *string   `json:"parent"` // the transaction it is nested in (TX.2.2); null for a top-level one
	Manager string    `json:"manager"`
	Lease   leaseView `json:"lease"`
}

func viewTxn(tx *client.Transaction, parent uint64) txnView {
	v := txnView{ID: jsonUint(tx.ID()), Token: tx.Token(), Manager: tx.Manager().Ref().String(), Lease: viewLease(tx.Lease())}
	if parent != 0 {
		p := jsonUint(parent)
		v.Parent = &p
	}
	return v
}

func printTxn(w io.Writer, v txnView) {
	fmt.Fprintf(w, "transaction %s\n", v.ID)
	fmt.Fprintf(w, "txn token   %s  (to work under it: --txn TOKEN; keep it secret)\n", v.Token)
	if v.Parent != nil {
		fmt.Fprintf(w, "nested in   %s\n", *v.Parent)
	}
	fmt.Fprintf(w, "manager     %s\nlease       %s\nexpires     %s\ntoken       %s\n", v.Manager, v.Lease.Name, v.Lease.expiresText(), v.Lease.Token)
}

type txnDescriptionView struct {
	ID           string            `json:"id"`
	State        string            `json:"state"`
	Parent       *string           `json:"parent"` // null: top-level
	Nested       []string          `json:"nested"`
	Lease        *leaseView        `json:"lease"` // null: the lease ended
	Participants []participantView `json:"participants"`
}

type participantView struct {
	Participant  string  `json:"participant"`
	CrashCount   string  `json:"crash_count"`
	Vote         string  `json:"vote"`
	Notified     bool    `json:"notified"`
	LastError    *string `json:"last_error"`    // null: none failing
	FailingSince *string `json:"failing_since"` // null: none failing
}

func viewTxnDescription(d *client.TransactionDescription) txnDescriptionView {
	v := txnDescriptionView{ID: jsonUint(d.ID), State: d.State.String(), Nested: jsonUints(d.Children), Participants: []participantView{}}
	if d.Parent != 0 {
		p := jsonUint(d.Parent)
		v.Parent = &p
	}
	if d.Lease != nil {
		l := viewLease(d.Lease)
		v.Lease = &l
	}
	for _, p := range d.Participants {
		pv := participantView{Participant: p.Participant.String(), CrashCount: jsonInt(p.CrashCount), Vote: p.Vote.String(), Notified: p.Notified}
		if p.LastError != nil {
			e := p.LastError.Error()
			pv.LastError = &e
			pv.FailingSince = jsonInstant(p.FailingSince)
		}
		v.Participants = append(v.Participants, pv)
	}
	return v
}

func printTxnDescription(w io.Writer, v txnDescriptionView) {
	fmt.Fprintf(w, "transaction  %s\nstate        %s\n", v.ID, v.State)
	if v.Parent != nil {
		fmt.Fprintf(w, "nested in    %s\n", *v.Parent)
	}
	if len(v.Nested) > 0 {
		fmt.Fprintf(w, "nested       %s\n", strings.Join(v.Nested, " "))
	}
	if v.Lease != nil {
		fmt.Fprintf(w, "lease        %s\nexpires      %s\n", v.Lease.Name, v.Lease.expiresText())
	} else {
		fmt.Fprintf(w, "lease        (ended)\n")
	}
	if len(v.Participants) == 0 {
		fmt.Fprintf(w, "participants (none)\n")
	}
	for _, p := range v.Participants {
		fmt.Fprintf(w, "participant  %s crash=%s vote=%s notified=%v\n", p.Participant, p.CrashCount, p.Vote, p.Notified)
		if p.LastError != nil {
			fmt.Fprintf(w, "             failing since %s: %s\n", *p.FailingSince, *p.LastError)
		}
	}
}

// printTxnList prints one transaction a line.
func printTxnList(w io.Writer, vs []txnDescriptionView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPARENT\tPARTICIPANTS\tLEASE LEFT")
	for _, v := range vs {
		parent, left := "-", "(ended)"
		if v.Parent != nil {
			parent = *v.Parent
		}
		if v.Lease != nil {
			left = v.Lease.Remaining.Human
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", v.ID, v.State, parent, len(v.Participants), left)
	}
	tw.Flush()
}

// parseTxnState parses --state: empty for any.
func parseTxnState(s string) (client.TransactionState, error) {
	switch strings.ToLower(s) {
	case "":
		return 0, nil
	case "active":
		return client.TxnActive, nil
	case "voting":
		return client.TxnVoting, nil
	case "committed":
		return client.TxnCommitted, nil
	case "aborted":
		return client.TxnAborted, nil
	}
	return 0, usageError{fmt.Errorf("--state %q: want active, voting, committed or aborted", s)}
}

// parseTxnID parses a transaction argument as its creator names it to
// commit, abort or show it: its id, or its token (ID.SECRET).
func parseTxnID(s string) (uint64, error) {
	id, _, err := client.ParseTransactionToken(s)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("transaction id %q: want a decimal number from 1 (txn create and txn ls print them), or a token ID.SECRET", abbrevArg(s))}
	}
	return id, nil
}

// parseTxnToken parses a transaction argument as the commands that work
// under a transaction take it: its token, ID.SECRET, as txn create
// printed it. Its id alone is no capability.
func parseTxnToken(s string) (uint64, djinn.ID, error) {
	id, secret, err := client.ParseTransactionToken(s)
	switch {
	case err != nil:
		if n, perr := strconv.ParseUint(strings.Split(s, ".")[0], 10, 64); perr != nil || n == 0 {
			return 0, djinn.ID{}, usageError{fmt.Errorf("transaction id %q: want a token ID.SECRET, as djinn txn create printed it", abbrevArg(s))}
		}
		return 0, djinn.ID{}, usageError{err}
	case secret.IsZero():
		return 0, djinn.ID{}, usageError{fmt.Errorf("transaction %d: its id alone does not let one work under it; pass its token, ID.SECRET, as djinn txn create printed it", id)}
	}
	return id, secret, nil
}

// abbrevArg shortens an argument for an error message.
func abbrevArg(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut-- // not within a character: its bytes would be quoted as \x escapes
	}
	return s[:cut] + "…"
}
