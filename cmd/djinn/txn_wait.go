package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// Commit and abort: bounded by --wait, with progress while they wait and
// the reason when a transaction aborted.

// progressEvery is how often a wait says what it waits for.
const progressEvery = time.Second

// finish commits or aborts tx. Without a wait it returns once the outcome
// is decided; with one, also once every participant was told, wait at
// most, writing on stderr each second which participants have not
// answered.
func (g *globals) finish(cmd *cobra.Command, tx *client.Transaction, op string, wait time.Duration) error {
	ctx := cmd.Context()
	call := func(ctx context.Context) error {
		switch {
		case op == "commit" && wait > 0:
			return tx.CommitWait(ctx, wait)
		case op == "commit":
			return tx.Commit(ctx)
		case wait > 0:
			return tx.AbortWait(ctx, wait)
		}
		return tx.Abort(ctx)
	}
	if wait == 0 {
		return g.finishError(ctx, tx, op, 0, call(ctx))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(wctx) }()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case err := <-done:
			// gRPC may notice the deadline a moment before the context.
			if err != nil && ctx.Err() == nil && (wctx.Err() != nil || strings.Contains(err.Error(), "deadline exceeded")) {
				return g.waitPassed(ctx, tx, op, wait)
			}
			return g.finishError(ctx, tx, op, wait, err)
		case <-tick.C:
			g.progress(cmd, wctx, tx, time.Since(start), wait)
		}
	}
}

// progress says on stderr what the wait is waiting for.
func (g *globals) progress(cmd *cobra.Command, ctx context.Context, tx *client.Transaction, waited, wait time.Duration) {
	dctx, cancel := context.WithTimeout(ctx, progressEvery)
	defer cancel()
	d, err := tx.Describe(dctx)
	if err != nil {
		return
	}
	pending := pendingParticipants(d)
	if len(pending) == 0 {
		return
	}
	g.notice(cmd.ErrOrStderr(), map[string]any{"transaction": jsonUint(d.ID), "state": d.State.String(), "waiting_for": pending},
		fmt.Sprintf("waited %s of %s: transaction %d is %s; waiting for %s", waited.Round(time.Second), wait, d.ID, d.State, strings.Join(pending, "; ")))
}

// pendingParticipants are the participants a transaction waits for, each
// with what is known of why: those that have not voted while it is
// VOTING, those not told once it is decided.
func pendingParticipants(d *client.TransactionDescription) []string {
	var out []string
	for _, p := range d.Participants {
		voting := d.State == client.TxnVoting && p.Vote == 0
		if !voting && (d.State == client.TxnVoting || p.Notified) {
			continue
		}
		s := p.Participant.String()
		if voting {
			s += " (no vote yet"
		} else {
			s += " (not told yet"
		}
		if p.LastError != nil {
			s += fmt.Sprintf("; failing since %s: %v", p.FailingSince.Format(time.RFC3339), p.LastError)
		}
		out = append(out, s+")")
	}
	return out
}

// waitPassed is the error of a wait that ran out before the manager
// answered.
func (g *globals) waitPassed(ctx context.Context, tx *client.Transaction, op string, wait time.Duration) error {
	d, err := describeAfter(ctx, tx)
	if err != nil {
		return fmt.Errorf("%s of transaction %d: no answer within --wait %s, and then: %w", op, tx.ID(), wait, err)
	}
	if d.State == client.TxnCommitted || d.State == client.TxnAborted {
		return notTold(d, strings.ToLower(d.State.String()), wait)
	}
	msg := fmt.Sprintf("%s of transaction %d: --wait %s passed with the transaction %s", op, tx.ID(), wait, d.State)
	if pending := pendingParticipants(d); len(pending) > 0 {
		msg += "; waiting for " + strings.Join(pending, "; ")
	}
	return errors.New(msg + fmt.Sprintf("; the manager goes on by itself (djinn txn show %d follows it)", tx.ID()))
}

// notTold is the error of a decided transaction whose participants were
// not all told within the wait.
func notTold(d *client.TransactionDescription, outcome string, wait time.Duration) error {
	msg := fmt.Sprintf("the transaction %s, but not every participant was told within --wait %s", outcome, wait)
	if pending := pendingParticipants(d); len(pending) > 0 {
		msg += ": " + strings.Join(pending, "; ")
	}
	return fmt.Errorf("%s; the manager keeps telling them (djinn txn show %d follows it)", msg, d.ID)
}

// finishError explains a commit or abort that failed: how the transaction
// ended and why, and who was not told.
func (g *globals) finishError(ctx context.Context, tx *client.Transaction, op string, wait time.Duration, err error) error {
	var de *djinn.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de) && de.Kind == djinn.TimeoutExpired:
		outcome := "aborted"
		if de.Committed {
			outcome = "committed"
		}
		d, derr := describeAfter(ctx, tx)
		if derr != nil {
			d = &client.TransactionDescription{ID: tx.ID()}
		}
		return notTold(d, outcome, wait)
	case errors.Is(err, djinn.ErrCannotCommit):
		return fmt.Errorf("cannot commit: %w%s", err, abortReason(ctx, tx))
	case errors.Is(err, djinn.ErrCannotAbort):
		return fmt.Errorf("cannot abort: %w", err)
	}
	return err
}

// abortReason says why an aborted transaction aborted, when its
// participants tell: a vote to abort, or a participant that did not vote.
func abortReason(ctx context.Context, tx *client.Transaction) string {
	d, err := describeAfter(ctx, tx)
	if err != nil {
		return ""
	}
	var why []string
	for _, p := range d.Participants {
		switch {
		case p.Vote == client.TxnAborted:
			why = append(why, fmt.Sprintf("participant %s voted to abort", p.Participant))
		case p.Vote == 0 && p.LastError != nil:
			why = append(why, fmt.Sprintf("participant %s did not vote: %v", p.Participant, p.LastError))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}

// describeAfter describes tx once the command's own wait is over.
func describeAfter(ctx context.Context, tx *client.Transaction) (*client.TransactionDescription, error) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return tx.Describe(dctx)
}
