package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// What the lock commands print.

type lockSetView struct {
	Set           string         `json:"set"`
	Transactional bool           `json:"transactional"`
	Related       []string       `json:"related"`
	Lease         *leaseView     `json:"lease"` // null: the set's lease ended
	LastFence     string         `json:"last_fence"`
	Holders       []lockHoldView `json:"holders"`
	Waiters       []lockWaitView `json:"waiters"`
	// HoldersTotal and WaitersTotal count them all: more than Holders
	// and Waiters list when a busy set's did not fit in a message.
	HoldersTotal int `json:"holders_total"`
	WaitersTotal int `json:"waiters_total"`
}

// lockHolderView names a holder: an owner by the fingerprint of its
// lease's cookie (what djinn lock owner prints beside the owner's name: the
// cookie itself is a capability, not shown to others), a transaction by
// its id and its manager's reference. The other fields are null.
type lockHolderView struct {
	Owner       *string `json:"owner"`
	Transaction *string `json:"transaction"`
	Manager     *string `json:"manager"`
}

type lockHoldView struct {
	lockHolderView
	Locks  map[string]int `json:"locks"` // mode: count
	Fences []string       `json:"fences"`
}

type lockWaitView struct {
	lockHolderView
	Mode    string  `json:"mode"`
	From    *string `json:"from"` // a change of mode: the mode held; else null
	Request string  `json:"request"`
}

func viewLockHolder(h client.LockHolder) lockHolderView {
	if tx := h.Transaction(); tx != nil {
		id, mgr := jsonUint(tx.ID()), managerName(tx.Manager().Ref())
		return lockHolderView{Transaction: &id, Manager: &mgr}
	}
	fp := strings.TrimPrefix(h.String(), "owner ")
	return lockHolderView{Owner: &fp}
}

// managerName prints a manager's reference; one known by its identity
// alone prints as SERVICE/OBJECT.
func managerName(r djinn.Ref) string {
	if r.Endpoint == "" {
		return r.Service.String() + "/" + r.Object.String()
	}
	return r.String()
}

func (v lockHolderView) String() string {
	if v.Owner != nil {
		return "owner " + *v.Owner
	}
	return fmt.Sprintf("transaction %s of %s", *v.Transaction, *v.Manager)
}

func viewLockSet(d *client.LockSetDescription) lockSetView {
	v := lockSetView{Set: d.ID.String(), Transactional: d.Transactional, LastFence: jsonUint(d.LastFence),
		HoldersTotal: d.HoldersTotal, WaitersTotal: d.WaitersTotal,
		Related: []string{}, Holders: []lockHoldView{}, Waiters: []lockWaitView{}}
	for _, r := range d.Related {
		v.Related = append(v.Related, r.String())
	}
	if d.Lease != nil {
		l := viewLease(d.Lease)
		v.Lease = &l
	}
	for _, h := range d.Holders {
		hv := lockHoldView{lockHolderView: viewLockHolder(h.Holder), Locks: map[string]int{}, Fences: jsonUints(h.Fences)}
		for m, n := range h.Counts {
			hv.Locks[m.String()] = n
		}
		v.Holders = append(v.Holders, hv)
	}
	for _, w := range d.Waiters {
		wv := lockWaitView{lockHolderView: viewLockHolder(w.Holder), Mode: w.Mode.String(), Request: jsonUint(w.RequestID)}
		if w.Held != 0 {
			from := w.Held.String()
			wv.From = &from
		}
		v.Waiters = append(v.Waiters, wv)
	}
	return v
}

func printLockSet(w io.Writer, v lockSetView) {
	fmt.Fprintf(w, "set            %s\ntransactional  %v\n", v.Set, v.Transactional)
	if len(v.Related) == 0 {
		fmt.Fprintf(w, "related        (none)\n")
	} else {
		fmt.Fprintf(w, "related        %s\n", strings.Join(v.Related, " "))
	}
	if v.Lease != nil {
		fmt.Fprintf(w, "lease          %s\nexpires        %s\n", v.Lease.Name, v.Lease.expiresText())
	} else {
		fmt.Fprintf(w, "lease          (ended)\n")
	}
	fmt.Fprintf(w, "last fence     %s\n", v.LastFence)
	if len(v.Holders) == 0 {
		fmt.Fprintf(w, "holders        (none)\n")
	}
	for _, h := range v.Holders {
		var locks []string
		for _, m := range client.LockModes() {
			if n := h.Locks[m.String()]; n > 0 {
				locks = append(locks, fmt.Sprintf("%s=%d", m, n))
			}
		}
		fmt.Fprintf(w, "holder         %s  %s  fences %s\n", h.lockHolderView, strings.Join(locks, " "), strings.Join(h.Fences, " "))
	}
	if len(v.Waiters) == 0 {
		fmt.Fprintf(w, "waiters        (none)\n")
	}
	for i, wt := range v.Waiters {
		mode := wt.Mode
		if wt.From != nil {
			mode = *wt.From + "->" + wt.Mode
		}
		fmt.Fprintf(w, "waiter %-7d %s  %s  request %s\n", i+1, wt.lockHolderView, mode, wt.Request)
	}
	if more := v.HoldersTotal - len(v.Holders); more > 0 {
		fmt.Fprintf(w, "and %d more holders (of %d): a description lists what a message holds\n", more, v.HoldersTotal)
	}
	if more := v.WaitersTotal - len(v.Waiters); more > 0 {
		fmt.Fprintf(w, "and %d more waiters (of %d): a description lists what a message holds\n", more, v.WaitersTotal)
	}
}

type lockCreatedView struct {
	Set           string    `json:"set"`
	Transactional bool      `json:"transactional"`
	Related       *string   `json:"related"` // null: none
	Lease         leaseView `json:"lease"`
}

func printLockCreated(w io.Writer, v lockCreatedView) {
	fmt.Fprintf(w, "set            %s\ntransactional  %v\n", v.Set, v.Transactional)
	if v.Related != nil {
		fmt.Fprintf(w, "related        %s\n", *v.Related)
	}
	fmt.Fprintf(w, "lease          %s\nexpires        %s\ntoken          %s\n", v.Lease.Name, v.Lease.expiresText(), v.Lease.Token)
}

type lockOwnerView struct {
	Owner       string    `json:"owner"`       // the owner's name: its lease's short name, which --owner takes
	Fingerprint string    `json:"fingerprint"` // how lock show names it to everyone
	Lease       leaseView `json:"lease"`
}

func printLockOwner(w io.Writer, v lockOwnerView) {
	fmt.Fprintf(w, "owner          %s\nfingerprint    %s (lock show lists the owner by it)\nexpires        %s\ntoken          %s\n",
		v.Owner, v.Fingerprint, v.Lease.expiresText(), v.Lease.Token)
}

type lockGrantView struct {
	Set     string  `json:"set"`
	Mode    string  `json:"mode"`
	From    *string `json:"from"` // change: the mode given up; else null
	Granted bool    `json:"granted"`
	Fence   *string `json:"fence"` // null: not granted
}

// granted is the view of a grant with fence.
func (v lockGrantView) granted(fence uint64) lockGrantView {
	f := jsonUint(fence)
	v.Granted, v.Fence = true, &f
	return v
}
