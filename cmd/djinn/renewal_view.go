package main

import (
	"fmt"
	"io"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// What the renewal commands print.

type renewalSetView struct {
	ID                string               `json:"set"`
	Ref               string               `json:"reference"`
	Lease             leaseView            `json:"lease"`
	Leases            int64                `json:"leases"`
	ExpirationWarning *renewalListenerView `json:"expiration_warning"` // null: none
	RenewalFailure    *renewalListenerView `json:"renewal_failure"`    // null: none
}

type renewalListenerView struct {
	Listener   string        `json:"listener"`
	Handback   string        `json:"handback"`
	MinWarning *durationJSON `json:"min_warning,omitempty"` // the expiration warning's
	NextSeq    string        `json:"next_sequence"`
	Pending    int64         `json:"pending_events"`
}

func viewRenewalSet(s *client.RenewalSet, info *client.RenewalSetInfo) renewalSetView {
	v := renewalSetView{ID: s.ID().String(), Ref: s.Ref().String(), Lease: viewLease(s.Lease())}
	if info == nil {
		return v
	}
	v.Lease, v.Leases = viewLease(info.Lease), info.Leases
	v.ExpirationWarning = viewRenewalListener(info.ExpirationWarning, true)
	v.RenewalFailure = viewRenewalListener(info.RenewalFailure, false)
	return v
}

func viewRenewalListener(l *client.RenewalListener, warning bool) *renewalListenerView {
	if l == nil {
		return nil
	}
	v := &renewalListenerView{Listener: l.Listener.String(), Handback: string(l.Handback), NextSeq: jsonInt(l.NextSeq), Pending: l.Pending}
	if warning {
		d := jsonDuration(l.MinWarning)
		v.MinWarning = &d
	}
	return v
}

func printRenewalSet(w io.Writer, v renewalSetView, listeners bool) {
	fmt.Fprintf(w, "set        %s\nreference  %s\nlease      %s\nexpires    %s\ntoken      %s\nleases     %d\n",
		v.ID, v.Ref, v.Lease.Name, v.Lease.expiresText(), v.Lease.Token, v.Leases)
	if !listeners {
		return
	}
	if l := v.ExpirationWarning; l != nil {
		fmt.Fprintf(w, "warning    %s min-warning=%s handback=%q next-seq=%s pending=%d\n", l.Listener, l.MinWarning.Human, l.Handback, l.NextSeq, l.Pending)
	} else {
		fmt.Fprintf(w, "warning    (none)\n")
	}
	if l := v.RenewalFailure; l != nil {
		fmt.Fprintf(w, "failures   %s handback=%q next-seq=%s pending=%d\n", l.Listener, l.Handback, l.NextSeq, l.Pending)
	} else {
		fmt.Fprintf(w, "failures   (none)\n")
	}
}

type clientLeaseView struct {
	Lease      string       `json:"lease"` // its short name
	Landlord   string       `json:"landlord"`
	Expiration *string      `json:"expiration"`         // the last recorded; null: never
	Desired    *string      `json:"desired_expiration"` // null: never
	Renew      durationJSON `json:"renew"`
	LastError  *string      `json:"last_error"` // null: none
	Token      string       `json:"token"`

	desired string
}

func viewClientLease(c client.ClientLease) clientLeaseView {
	v := clientLeaseView{
		Lease: c.Lease.Cookie().String(), Landlord: c.Lease.Landlord().String(), Expiration: jsonInstant(c.Lease.Expiration()),
		Desired: jsonInstant(c.Desired), Renew: jsonDuration(c.RenewDuration), Token: c.Lease.Token(), desired: textInstant(c.Desired),
	}
	if c.LastError != nil {
		e := c.LastError.Error()
		v.LastError = &e
	}
	return v
}

func printClientLeases(w io.Writer, vs []clientLeaseView) {
	for _, v := range vs {
		exp := "never"
		if v.Expiration != nil {
			exp = *v.Expiration
		}
		fmt.Fprintf(w, "lease=%s landlord=%s expires=%s desired=%s renew=%s", v.Lease, v.Landlord, exp, v.desired, v.Renew.Human)
		if v.LastError != nil {
			fmt.Fprintf(w, " last-error=%q", *v.LastError)
		}
		fmt.Fprintf(w, " token=%s\n", v.Token)
	}
}

type eventRegistrationView struct {
	ID     string    `json:"event_id"`
	Source string    `json:"source"`
	Seq    string    `json:"sequence"`
	Lease  leaseView `json:"lease"`
}

func printEventRegistration(g *globals, w io.Writer, r *client.EventRegistration) error {
	v := eventRegistrationView{ID: jsonInt(r.ID), Source: r.Source.String(), Seq: jsonInt(r.Seq), Lease: viewLease(r.Lease)}
	return g.print(w, v, func(w io.Writer) {
		fmt.Fprintf(w, "event id   %s\nsource     %s\nsequence   %s\nlease      %s\ntoken      %s\n", v.ID, v.Source, v.Seq, v.Lease.Name, v.Lease.Token)
	})
}

// parseRef parses a reference flag, naming the flag in the error.
func parseRef(flag, s string) (djinn.Ref, error) {
	if s == "" {
		return djinn.Ref{}, usageError{fmt.Errorf("--%s: missing: a reference, djinn://host:port/SERVICE/OBJECT", flag)}
	}
	r, err := djinn.ParseRef(s)
	if err != nil {
		return r, usageError{fmt.Errorf("--%s: %w", flag, err)}
	}
	return r, nil
}

// handbackBytes is the handback of a flag: none when empty.
func handbackBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
