package client

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The kinds of resource a cluster lists (Client.Resources).
const (
	KindLeases           = "leases"
	KindMailboxes        = "mailboxes"
	KindRenewalSets      = "renewal-sets"
	KindLockSets         = "lock-sets"
	KindLDSRegistrations = "lds-registrations"
	KindTransactions     = "transactions"
	KindLookupItems      = "lookup-items"
)

// ResourceQuery asks for a page of one kind of resource.
type ResourceQuery struct {
	// Kind is what to list (KindLeases, …).
	Kind string
	// After starts the page after this name (a previous page's Next).
	After string
	// Max bounds the page: 0 for the server's default (100), at most 1000.
	Max int
	// All lists every principal's resources; Principal, when not nil, one
	// principal's ("" is the anonymous principal). Either needs the
	// operator role. Without them the caller's own are listed.
	All       bool
	Principal *string
	// Filter narrows the kind: leases by "kind" (what a lease covers, as
	// "mailbox registration"), transactions by "state" (ACTIVE, …),
	// lookup items by "type" (a service type).
	Filter map[string]string
}

// Resource is one resource a cluster holds.
type Resource struct {
	// Name is its name: a lease's cookie, a registration's or a set's id,
	// in hex; a transaction's id in decimal.
	Name      string
	Principal string
	// Lease is the cookie of its lease; zero when it has none any more (a
	// decided transaction).
	Lease djinn.ID
	// Expires is when its lease expires: djinn.EndOfTime for never.
	Expires time.Time
	// Details are its kind's facts, by name.
	Details map[string]string
	// Redacted says it is another principal's, listed to an operator:
	// Lease is zero, Name, when it is a capability, its fingerprint (the
	// first 16 hex digits of its SHA-256, as the console shows it), and a
	// delivery target "(redacted)".
	Redacted bool
}

// ResourcePage is one page of resources, in name order.
type ResourcePage struct {
	Resources []Resource
	// Next is the name to ask After for the next page; "" on the last.
	Next string
	// Total is how many the listing covers, over every page.
	Total int
}

// Resources lists a page of one kind of resource the cluster holds: the
// caller's own, or with q.All or q.Principal (the operator role) every
// principal's or one's.
func (c *Client) Resources(ctx context.Context, q ResourceQuery) (*ResourcePage, error) {
	req := &djinnpb.ListResourcesRequest{Kind: q.Kind, After: q.After, Max: int32(q.Max), All: q.All, Filter: q.Filter}
	if q.Principal != nil {
		req.Principal, req.IsPrincipal = *q.Principal, true
	}
	resp, err := djinnpb.NewResourcesClient(c.ClientConn()).List(ctx, req)
	if err != nil {
		return nil, err
	}
	page := &ResourcePage{Next: resp.GetNext(), Total: int(resp.GetTotal()), Resources: make([]Resource, 0, len(resp.GetResources()))}
	for _, r := range resp.GetResources() {
		res := Resource{Name: r.GetName(), Principal: r.GetPrincipal(), Expires: djinn.EndOfTime, Details: r.GetDetails(), Redacted: r.GetRedacted()}
		if len(r.GetLeaseCookie()) > 0 {
			if res.Lease, err = djinn.IDFromBytes("lease cookie", r.GetLeaseCookie()); err != nil {
				return nil, err
			}
		}
		if n := r.GetExpiresUnixNanos(); n != 0 {
			res.Expires = time.Unix(0, n)
		}
		page.Resources = append(page.Resources, res)
	}
	return page, nil
}
