package server

import (
	"math"
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The kinds the services list (Resources.List), each a part's list hook.

// refText is a reference as text, or "" for none.
func refText(r *djinnpb.Ref) string {
	if r == nil {
		return ""
	}
	ref, err := wire.RefFrom("ref", r)
	if err != nil {
		return ""
	}
	return ref.String()
}

// listMailboxes lists the event mailbox's registrations.
func (s *Server) listMailboxes(st *mailbox.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, in := range st.List() {
			d := map[string]string{"stored_events": itoa(in.Stored), "target": refText(in.Target)}
			if res, ok := s.leaseResource(in.ID.String(), in.Cookie, d); ok {
				res.Principal = in.Principal
				out = append(out, res)
			}
		}
		return out, nil
	}
}

// listRenewalSets lists the renewal service's sets.
func (s *Server) listRenewalSets(st *renewal.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, in := range st.List() {
			if res, ok := s.leaseResource(in.ID.String(), in.Cookie, map[string]string{"leases": itoa(in.Leases)}); ok {
				res.Principal = in.Principal
				out = append(out, res)
			}
		}
		return out, nil
	}
}

// listLockSets lists the lock service's sets.
func (s *Server) listLockSets(st *lock.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, v := range st.Sets() {
			d := map[string]string{"transactional": strconv.FormatBool(v.Transactional), "holders": itoa(len(v.Holders)), "waiters": itoa(len(v.Waiters))}
			if res, ok := s.leaseResource(v.ID.String(), v.Cookie, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}

// listLDSRegistrations lists the lookup discovery service's
// registrations, named by their leases.
func (s *Server) listLDSRegistrations(st *lds.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, l := range st.List() {
			groups := strings.Join(l.Info.Groups, ",")
			if l.Info.AllGroups {
				groups = "(all)"
			}
			d := map[string]string{"groups": groups, "locators": strings.Join(l.Info.Locators, ","), "registrars": itoa(len(l.Registrars))}
			if res, ok := s.leaseResource(l.Cookie.String(), l.Cookie, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}

// listTransactions lists the transaction manager's transactions, named by
// id; filter "state" keeps those in one state (ACTIVE, COMMITTED, …).
func (s *Server) listTransactions(st *txn.State) lister {
	return func(filter map[string]string) ([]*djinnpb.Resource, error) {
		var want djinnpb.TransactionState
		if name, ok := filter["state"]; ok {
			v, known := djinnpb.TransactionState_value["TRANSACTION_STATE_"+strings.ToUpper(name)]
			if !known || v == 0 {
				return nil, djinn.Errorf(djinn.InvalidArgument, "state %q: want ACTIVE, VOTING, PREPARED, NOTCHANGED, COMMITTED or ABORTED", name)
			}
			want = djinnpb.TransactionState(v)
		}
		var out []*djinnpb.Resource
		for _, in := range st.All(math.MaxInt) {
			if want != 0 && in.State != want {
				continue
			}
			parent := ""
			if in.Parent != 0 {
				parent = strconv.FormatUint(in.Parent, 10)
			}
			state := strings.TrimPrefix(in.State.String(), "TRANSACTION_STATE_")
			d := map[string]string{"state": state, "parent": parent, "participants": itoa(len(in.Parts))}
			res := &djinnpb.Resource{Name: strconv.FormatUint(in.ID, 10), Principal: in.Principal, LeaseCookie: in.Cookie[:], Details: d}
			if l, ok := s.leaseResource(res.Name, in.Cookie, d); ok {
				res.ExpiresUnixNanos = l.ExpiresUnixNanos
			} else {
				res.LeaseCookie = nil // decided: its lease ended
			}
			out = append(out, res)
		}
		return out, nil
	}
}

// listLookupItems lists the lookup service's registrations (not its own
// item, which has no lease), named by service id; filter "type" keeps
// those of a service type.
func (s *Server) listLookupItems(st *lookup.State) lister {
	return func(filter map[string]string) ([]*djinnpb.Resource, error) {
		var tmpl service.Template
		if t, ok := filter["type"]; ok {
			tmpl.Types = []string{t}
		}
		_, items, err := st.Lookup(tmpl, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		var out []*djinnpb.Resource
		for _, it := range items {
			c, ok := st.Cookie(it.ID)
			if !ok {
				continue
			}
			d := map[string]string{"types": strings.Join(it.Types, ","), "service": string(it.Service)}
			if res, ok := s.leaseResource(it.ID.String(), c, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}
