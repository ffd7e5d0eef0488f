package robust

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The isolation workload's mailbox registration, transaction, renewal
// set and lookup item.

// isoMailbox registers and stores one event: the intruder's pull would
// receive it, its acknowledgement would drop it.
func (r *Run) isoMailbox(ctx context.Context, owner *Caller) *isoResource {
	var reg *djinnpb.MailboxRegistration
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewEventMailboxClient(cc).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(isoLease)})
		reg = got
		return err
	}) {
		return nil
	}
	id := reg.RegistrationId
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("robust-isolation"), ObjectId: []byte("robust-isolation")}
	notify := &djinnpb.NotifyRequest{ListenerId: reg.Listener.ObjectId, Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: 1}}
	stored := int64(0)
	if create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := djinnpb.NewEventListenerClient(cc).Notify(ctx, notify)
		return err
	}) {
		stored = 1
	}
	mb := func(cc *grpc.ClientConn) djinnpb.EventMailboxClient { return djinnpb.NewEventMailboxClient(cc) }
	return &isoResource{name: "mailbox registration", tries: []isoTry{
		{"pull", func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := mb(cc).Pull(ctx, &djinnpb.PullRequest{RegistrationId: id})
			if err == nil {
				_, err = s.Recv() // the stored event, were the pull the owner's
			}
			return err
		}},
		{"ack", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := mb(cc).Ack(ctx, &djinnpb.AckRequest{RegistrationId: id, ThroughIndex: 1 << 40})
			return err
		}},
		{"get registration", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := mb(cc).GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: id})
			return err
		}},
		{"disable delivery", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := mb(cc).DisableDelivery(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: id})
			return err
		}},
		{"lease cancel", cancelLease(reg.Lease.Cookie)},
	}, intact: func(ctx context.Context, cc *grpc.ClientConn) (string, error) {
		got, err := mb(cc).GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: id})
		if err != nil || got.StoredEvents >= stored {
			return "", err
		}
		return fmt.Sprintf("it stores %d events, not the %d it was sent", got.StoredEvents, stored), nil
	}, end: cancelLease(reg.Lease.Cookie)}
}

// isoTxn creates a transaction the intruder would commit or abort.
func (r *Run) isoTxn(ctx context.Context, owner *Caller) *isoResource {
	var tx *djinnpb.CreatedTransaction
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewTransactionManagerClient(cc).Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(isoLease)})
		tx = got
		return err
	}) {
		return nil
	}
	tm := func(cc *grpc.ClientConn) djinnpb.TransactionManagerClient {
		return djinnpb.NewTransactionManagerClient(cc)
	}
	return &isoResource{name: "transaction", tries: []isoTry{
		{"abort", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := tm(cc).Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: tx.Id})
			return err
		}},
		{"commit", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := tm(cc).Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: tx.Id})
			return err
		}},
		{"describe", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := tm(cc).Describe(ctx, &djinnpb.TransactionRequest{Id: tx.Id})
			return err
		}},
		{"get state by its id alone", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := tm(cc).GetState(ctx, &djinnpb.TransactionRequest{Id: tx.Id})
			return err
		}},
		{"lease cancel", cancelLease(tx.Lease.Cookie)},
	}, intact: func(ctx context.Context, cc *grpc.ClientConn) (string, error) {
		got, err := tm(cc).GetState(ctx, &djinnpb.TransactionRequest{Id: tx.Id, Secret: tx.Secret})
		if err != nil || got.State == djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE {
			return "", err
		}
		return fmt.Sprintf("it is %v, not active", got.State), nil
	}, end: func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := tm(cc).Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: tx.Id})
		return err
	}}
}

// isoRenewalSet creates a renewal set with a failure listener.
func (r *Run) isoRenewalSet(ctx context.Context, owner *Caller) *isoResource {
	var set *djinnpb.RenewalSet
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLeaseRenewalServiceClient(cc).CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(isoLease)})
		set = got
		return err
	}) {
		return nil
	}
	sid := &djinnpb.SetRequest{SetId: set.Set.ObjectId}
	lr := func(cc *grpc.ClientConn) djinnpb.LeaseRenewalServiceClient {
		return djinnpb.NewLeaseRenewalServiceClient(cc)
	}
	return &isoResource{name: "renewal set", tries: []isoTry{
		{"get set", func(ctx context.Context, cc *grpc.ClientConn) error { _, err := lr(cc).GetSet(ctx, sid); return err }},
		{"get leases", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := lr(cc).GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: sid.GetSetId()})
			return err
		}},
		{"clear renewal failure listener", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := lr(cc).ClearRenewalFailureListener(ctx, sid)
			return err
		}},
		{"lease cancel", cancelLease(set.Lease.Cookie)},
	}, intact: func(ctx context.Context, cc *grpc.ClientConn) (string, error) {
		_, err := lr(cc).GetSet(ctx, sid)
		return "", err
	}, end: cancelLease(set.Lease.Cookie)}
}

// isoItem registers a lookup item at version 1.
func (r *Run) isoItem(ctx context.Context, owner *Caller) *isoResource {
	id := djinn.NewID()
	sid := id[:]
	var cookie []byte
	if !create(ctx, owner, func(ctx context.Context, cc *grpc.ClientConn) error {
		got, err := djinnpb.NewLookupServiceClient(cc).Register(ctx, &djinnpb.RegisterRequest{Item: robustItem(sid, 1), LeaseDurationNanos: int64(isoLease)})
		if err == nil {
			cookie = got.Lease.Cookie
		}
		return err
	}) {
		return nil
	}
	return &isoResource{name: "lookup item", tries: []isoTry{
		{"set attributes", func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := djinnpb.NewLookupServiceClient(cc).SetAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: cookie, Entries: robustItem(nil, 99).Entries})
			return err
		}},
		{"lease cancel", cancelLease(cookie)},
	}, intact: func(ctx context.Context, cc *grpc.ClientConn) (string, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, "djinn-read", "linearizable")
		got, err := djinnpb.NewLookupServiceClient(cc).Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{ServiceId: sid}, MaxMatches: 1})
		switch {
		case err != nil:
			return "", err
		case len(got.Items) == 0:
			return "it is gone", nil
		case versionOf(got.Items[0]) != 1:
			return fmt.Sprintf("its attributes are version %d, not 1", versionOf(got.Items[0])), nil
		}
		return "", nil
	}, end: cancelLease(cookie)}
}
