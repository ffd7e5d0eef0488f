package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// What the lock commands print.

type lockSetView struct {
	Set           string         `json:"set"`
	Transactional bool           `json:"transactional"`
	Related       []string       `json:"related"`
	Lease         *leaseView     `json:"lease,omitempty"`
	LastFence     uint64         `json:"last_fence"`
	Holders       []lockHoldView `json:"holders"`
	Waiters       []lockWaitView `json:"waiters"`
}

// lockHolderView names a holder: an owner by the fingerprint of its
// lease's cookie (what djinn lock owner and djinn lease show print), a
// transaction by its id and its manager's reference.
type lockHolderView struct {
	Owner       string `json:"owner,omitempty"`
	Transaction uint64 `json:"transaction,omitempty"`
	Manager     string `json:"manager,omitempty"`
}

type lockHoldView struct {
	lockHolderView
	Locks  map[string]int `json:"locks"` // mode: count
	Fences []uint64       `json:"fences"`
}

type lockWaitView struct {
	lockHolderView
	Mode    string `json:"mode"`
	From    string `json:"from,omitempty"` // a change of mode: the mode held
	Request uint64 `json:"request"`
}

func viewLockHolder(h client.LockHolder) lockHolderView {
	if tx := h.Transaction(); tx != nil {
		return lockHolderView{Transaction: tx.ID(), Manager: managerName(tx.Manager().Ref())}
	}
	return lockHolderView{Owner: strings.TrimPrefix(h.String(), "owner ")}
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
	if v.Owner != "" {
		return "owner " + v.Owner
	}
	return fmt.Sprintf("transaction %d of %s", v.Transaction, v.Manager)
}

func viewLockSet(d *client.LockSetDescription) lockSetView {
	v := lockSetView{Set: d.ID.String(), Transactional: d.Transactional, LastFence: d.LastFence,
		Related: []string{}, Holders: []lockHoldView{}, Waiters: []lockWaitView{}}
	for _, r := range d.Related {
		v.Related = append(v.Related, r.String())
	}
	if d.Lease != nil {
		l := viewLease(d.Lease)
		v.Lease = &l
	}
	for _, h := range d.Holders {
		hv := lockHoldView{lockHolderView: viewLockHolder(h.Holder), Locks: map[string]int{}, Fences: h.Fences}
		if hv.Fences == nil {
			hv.Fences = []uint64{}
		}
		for m, n := range h.Counts {
			hv.Locks[m.String()] = n
		}
		v.Holders = append(v.Holders, hv)
	}
	for _, w := range d.Waiters {
		wv := lockWaitView{lockHolderView: viewLockHolder(w.Holder), Mode: w.Mode.String(), Request: w.RequestID}
		if w.Held != 0 {
			wv.From = w.Held.String()
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
		fmt.Fprintf(w, "lease          %s\nexpires        %s (in %s)\n", v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
	} else {
		fmt.Fprintf(w, "lease          (ended)\n")
	}
	fmt.Fprintf(w, "last fence     %d\n", v.LastFence)
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
		fences := make([]string, len(h.Fences))
		for i, f := range h.Fences {
			fences[i] = strconv.FormatUint(f, 10)
		}
		fmt.Fprintf(w, "holder         %s  %s  fences %s\n", h.lockHolderView, strings.Join(locks, " "), strings.Join(fences, " "))
	}
	if len(v.Waiters) == 0 {
		fmt.Fprintf(w, "waiters        (none)\n")
	}
	for i, wt := range v.Waiters {
		mode := wt.Mode
		if wt.From != "" {
			mode = wt.From + "->" + wt.Mode
		}
		fmt.Fprintf(w, "waiter %-7d %s  %s  request %d\n", i+1, wt.lockHolderView, mode, wt.Request)
	}
}

type lockCreatedView struct {
	Set           string    `json:"set"`
	Transactional bool      `json:"transactional"`
	Related       string    `json:"related,omitempty"`
	Lease         leaseView `json:"lease"`
}

type lockOwnerView struct {
	Owner string    `json:"owner"` // the fingerprint of its lease's cookie
	Lease leaseView `json:"lease"`
}

type lockGrantView struct {
	Set     string `json:"set"`
	Mode    string `json:"mode"`
	From    string `json:"from,omitempty"` // change: the mode given up
	Granted bool   `json:"granted"`
	Fence   uint64 `json:"fence,omitempty"`
}

func printLockCreated(w io.Writer, v lockCreatedView) {
	fmt.Fprintf(w, "set            %s\ntransactional  %v\n", v.Set, v.Transactional)
	if v.Related != "" {
		fmt.Fprintf(w, "related        %s\n", v.Related)
	}
	fmt.Fprintf(w, "lease          %s\nexpires        %s (in %s)\n", v.Lease.Token, v.Lease.Expiration, v.Lease.Remaining)
}
