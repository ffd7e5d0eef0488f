package server_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Arguments before ownership (DESIGN.md 7 and 8): a call whose argument
// is malformed whatever it names — a negative duration, a mode out of
// range, an empty or oversized field, an id or a reference that does not
// parse — is answered InvalidArgument naming the value, the same for the
// resource's owner, for another principal and for a resource that never
// existed; only a well-formed call meets the ownership check, and there
// another principal's resource answers as one that never existed. A check
// that depends on the resource's state (a mode the holder does not hold)
// comes after the ownership check, so it tells nothing to another.

// stateChecks are the argument checks that depend on the resource's
// state, by method: a part of the owner's error that names one. Under an
// owner rule the owner's call is refused by what its resource holds, and
// another's "not found" before it looks; under a capability rule whoever
// presents the capability is refused alike, and a call on a resource that
// does not exist "not found".
var stateChecks = map[string]string{
	// EM.4: acknowledging events not stored yet.
	mailboxSvc + "Ack": "past the last event stored",
	// A fence the set has not granted yet.
	lockSvc + "ValidateFence": "never granted by lock set",
	// A change's type against the supertypes the item's entries name.
	lookupSvc + "ModifyAttributes": "nor a supertype of it",
}

// TestArgumentsCheckedBeforeOwnership drives every unary RPC under an
// owner or a capability rule, on its own and carried in a session, with
// each of its matrix row's requests with one field at an edge of its
// range (TestEveryRPCTakesEdgeValues' mutations), as (a) another
// principal on resources that never existed, (b) another principal on
// the owner's resources (presenting the owner's capability, for a
// capability rule), (c) the owner on its own. When any of them is
// answered InvalidArgument, all three must be, with the same message but
// for the ids the requests carry; under an owner rule (a) and (b) answer
// alike for every mutation (nothing tells another principal's resource
// from one that never existed).
func TestArgumentsCheckedBeforeOwnership(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	rows, access, unary := matrixRows(), server.AccessOf(e.srv), server.SessionMethods(e.srv)
	ids := regexp.MustCompile(`[0-9a-f]{32}|\d{6,}`) // the ids sent: 128-bit in hex, transaction ids
	shape := func(err error) string {
		if err == nil {
			return "no error"
		}
		msg := err.Error()
		if len(msg) > 1000 { // an oversized value the message repeats
			msg = msg[:1000]
		}
		return string(djinn.KindOf(err)) + ": " + ids.ReplaceAllString(msg, "ID")
	}
	checked, rpcs, stated := 0, map[string]bool{}, map[string]bool{}
	for _, m := range slices.Sorted(maps.Keys(rows)) {
		a := access[m]
		if (a != server.Owner && a != server.Capability) || !unary[m] {
			continue
		}
		t.Run(strings.ReplaceAll(strings.TrimPrefix(m, "/djinn.v1."), "/", "."), func(t *testing.T) {
			// capture returns the request m's row makes on r.
			capture := func(r *resources, real bool) proto.Message {
				cp := &capture{ClientConnInterface: e.conns[asOwner], method: m}
				ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
				defer cancel()
				_ = rows[m](ctx, cp, r, real)
				if cp.req == nil {
					t.Fatalf("%s: its matrix row made no call of it", m)
				}
				return cp.req
			}
			owners := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOwner}
			own := mutations(capture(owners, true))
			never := neverResources(t, e, owners)
			unknown := mutations(capture(never, false))
			for _, name := range slices.Sorted(maps.Keys(own)) {
				// The session path is driven with the malformed
				// arguments the direct path finds: it runs the same
				// edge (TestAuthorizationNotFoundAsNeverExisted drives
				// it with well-formed ones).
				malformed := false
				for _, p := range paths {
					if p.name != "" && !malformed {
						continue
					}
					call := func(id identity, req proto.Message) error {
						ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
						defer cancel()
						return p.conn(e.conns[id]).Invoke(ctx, m, req, newOutput(t, m))
					}
					errA := call(asOther, unknown[name])
					errB := call(asOther, own[name])
					errC := call(asOwner, own[name])
					checked++
					sa, sb, sc := shape(errA), shape(errB), shape(errC)
					inv := func(err error) bool { return djinn.KindOf(err) == djinn.InvalidArgument }
					switch {
					case inv(errA) || inv(errB) || inv(errC):
						malformed = true
						rpcs[m] = true
						if marker, ok := stateChecks[m]; ok && inv(errC) && strings.Contains(sc, marker) {
							stated[m] = true
							alike := sa == sb && !inv(errB) // another principal's is not found
							if a == server.Capability {
								alike = sb == sc // the capability's holder is refused as its owner
							}
							if inv(errA) || !alike {
								t.Errorf("%s%s with %s (a check on the resource's state): (a) unknown id %q, (b) another principal's %q, (c) the owner's %q; want (a) not found, and (b) as (a) under an owner rule, as (c) under a capability",
									m, p.name, name, clip(sa), clip(sb), clip(sc))
							}
							break
						}
						if sa != sb || sb != sc || !inv(errA) {
							t.Errorf("%s%s with %s: (a) unknown id %q, (b) another principal's %q, (c) the owner's %q; want InvalidArgument, the same for all",
								m, p.name, name, clip(sa), clip(sb), clip(sc))
						}
					case a == server.Owner && sa != sb:
						t.Errorf("%s%s with %s as another principal: on the owner's resources %q, on ones that never existed %q", m, p.name, name, clip(sb), clip(sa))
					}
				}
			}
		})
	}
	t.Logf("%d mutations × 3 callers; %d RPCs refuse some InvalidArgument", checked, len(rpcs))
	for m := range stateChecks {
		if !stated[m] {
			t.Errorf("%s: no call was refused by its check on the resource's state (%q): drop it from stateChecks, or make the row reach it", m, stateChecks[m])
		}
	}
	if len(rpcs) == 0 {
		t.Error("no call was refused InvalidArgument: the mutations reach no argument check")
	}
}

// clip shortens an answer for a test's message.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// neverResources names resources no one made, of the services owners's
// are of (their manager's, their mailbox's listener service): what a
// call on "an unknown id" names.
func neverResources(t *testing.T, e *matrixEnv, owners *resources) *resources {
	newID := func() []byte { id := djinn.NewID(); return id[:] }
	mb := owners.mailbox()
	return &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOther,
		mreg:   &djinnpb.MailboxRegistration{RegistrationId: newID(), Lease: &djinnpb.Lease{Cookie: newID(), Landlord: mb.GetLease().GetLandlord()}, Listener: &djinnpb.Ref{Endpoint: mb.GetListener().GetEndpoint(), ServiceId: mb.GetListener().GetServiceId(), ObjectId: newID()}},
		rset:   &djinnpb.RenewalSet{Set: &djinnpb.Ref{ObjectId: newID()}},
		tx:     &djinnpb.CreatedTransaction{Id: 12345678901, Secret: newID(), Manager: owners.txn().GetManager()},
		lset:   &djinnpb.LockSetCreated{SetId: newID()},
		tset:   &djinnpb.LockSetCreated{SetId: newID()},
		held:   true,
		item:   &djinnpb.ServiceRegistration{Lease: &djinnpb.Lease{Cookie: newID()}},
		ldsReg: &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{Lease: &djinnpb.Lease{Cookie: newID()}}},
	}
}

// TestMalformedArgumentNamedWhateverTheID: one row per argument rule of
// an RPC that names a resource, each a call with one malformed argument,
// made (a) by another principal on a resource that never existed, (b) by
// another principal on the owner's (with the owner's capability, under a
// capability rule), (c) by the owner on its own — unary calls on their
// own and carried in a session, streams on their own. All three are
// refused InvalidArgument with a message that names the bad value; and
// the same call with the argument well formed is refused alike for (a)
// and (b) under an owner rule (DESIGN.md 7: another principal's resource
// does not exist for the caller).
func TestMalformedArgumentNamedWhateverTheID(t *testing.T) {
	t.Parallel()
	e := newMatrixEnv(t)
	access := server.AccessOf(e.srv)
	tm := djinnpb.NewTransactionManagerClient
	ld := djinnpb.NewLookupDiscoveryServiceClient
	rs := djinnpb.NewLeaseRenewalServiceClient
	mb := djinnpb.NewEventMailboxClient
	lk := djinnpb.NewLookupServiceClient
	ls := djinnpb.NewLockServiceClient
	wait := func(d time.Duration) *int64 { n := int64(d); return &n }
	set := func(r *resources) []byte { return r.renewalSet().GetSet().GetObjectId() }
	for _, row := range []struct {
		name, method string
		stream       bool
		// call makes the call on r's resources, with the argument
		// malformed when bad is set.
		call  func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error
		value string // what the error names
	}{
		{"TX.2.5 commit with a negative waitFor", txnSvc + "Commit", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			w := wait(time.Second)
			if bad {
				w = wait(-5 * time.Second)
			}
			return ok(tm(c).Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: r.txn().GetId(), WaitForNanos: w}))
		}, "waitFor -5s"},
		{"TX.2.5 abort with a negative waitFor", txnSvc + "Abort", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			w := wait(time.Second)
			if bad {
				w = wait(-7 * time.Second)
			}
			return ok(tm(c).Abort(ctx, &djinnpb.CompleteTransactionRequest{Id: r.txn().GetId(), WaitForNanos: w}))
		}, "waitFor -7s"},
		{"LD.4.1.1 change groups by an unknown operation", ldsSvc + "ChangeGroups", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			op := djinnpb.SetOp_SET_OP_ADD
			if bad {
				op = 7
			}
			return ok(ld(c).ChangeGroups(ctx, &djinnpb.LDSGroupsRequest{LeaseCookie: r.ldsCookie(), Op: op, Groups: []string{"g"}}))
		}, "groups operation 7"},
		{"LD.4.1.1 change locators with one that does not parse", ldsSvc + "ChangeLocators", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			loc := "jini://127.0.0.1:3"
			if bad {
				loc = "jini://127.0.0.1:99999"
			}
			return ok(ld(c).ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: r.ldsCookie(), Op: djinnpb.SetOp_SET_OP_ADD, Locators: []string{loc}}))
		}, "99999"},
		{"LD.4.1.1 discard a registrar id of 3 bytes", ldsSvc + "Discard", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			id := idBytes(djinn.NewID())
			if bad {
				id = id[:3]
			}
			return ok(ld(c).Discard(ctx, &djinnpb.LDSDiscardRequest{LeaseCookie: r.ldsCookie(), RegistrarServiceId: id}))
		}, "3 bytes"},
		{"LR.2 renewFor with a negative renew duration", renewalSvc + "RenewFor", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			renew := hour
			if bad {
				renew = -int64(3 * time.Second)
			}
			return ok(rs(c).RenewFor(ctx, &djinnpb.RenewForRequest{SetId: set(r), Lease: r.mailbox().GetLease(), DesiredDurationNanos: hour, RenewDurationNanos: renew}))
		}, "renew duration -3s"},
		{"LR.2 remove a lease without a cookie", renewalSvc + "Remove", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			l := proto.Clone(r.mailbox().GetLease()).(*djinnpb.Lease)
			if bad {
				l.Cookie = l.Cookie[:5]
			}
			return ok(rs(c).Remove(ctx, &djinnpb.RemoveRequest{SetId: set(r), Lease: l}))
		}, "lease cookie: 5 bytes"},
		{"LR.2 getLeases with a negative max", renewalSvc + "GetLeases", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			max := int32(10)
			if bad {
				max = -4
			}
			return ok(rs(c).GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: set(r), Max: max}))
		}, "max -4"},
		{"LR.2 getLeases after no page's next", renewalSvc + "GetLeases", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			var after []byte
			if bad {
				after = []byte("xyz")
			}
			return ok(rs(c).GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: set(r), Max: 10, After: after}))
		}, "after of 3 bytes"},
		{"LR.2.1 expiration warning with a negative minimum", renewalSvc + "SetExpirationWarningListener", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			w := int64(time.Minute)
			if bad {
				w = -int64(2 * time.Second)
			}
			return ok(rs(c).SetExpirationWarningListener(ctx, &djinnpb.SetExpirationWarningListenerRequest{SetId: set(r), Listener: anyListener(), MinWarningNanos: w}))
		}, "minimum warning -2s"},
		{"LR.2.1 failure listener at a port out of range", renewalSvc + "SetRenewalFailureListener", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			l := anyListener()
			if bad {
				l.Endpoint = "127.0.0.1:70000"
			}
			return ok(rs(c).SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{SetId: set(r), Listener: l}))
		}, "70000"},
		{"EM.4.1 delivery to a port out of range", mailboxSvc + "EnableDelivery", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			l := anyListener()
			if bad {
				l.Endpoint = "127.0.0.1:99999"
			}
			return ok(mb(c).EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: r.mailbox().GetRegistrationId(), Target: l}))
		}, "99999"},
		{"EM.4 unknown events with an oversized endpoint", mailboxSvc + "AddUnknownEvents", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			src := anyListener()
			if bad {
				src.Endpoint = strings.Repeat("h", 301)
			}
			return ok(mb(c).AddUnknownEvents(ctx, &djinnpb.AddUnknownEventsRequest{RegistrationId: r.mailbox().GetRegistrationId(), Events: []*djinnpb.EventKey{{Source: src, EventId: 9}}}))
		}, "endpoint of 301 bytes"},
		{"EM.4 pull with a negative batch", mailboxSvc + "Pull", true, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			if !bad {
				return nil // a well-formed pull waits for events
			}
			s, err := mb(c).Pull(ctx, &djinnpb.PullRequest{RegistrationId: r.mailbox().GetRegistrationId(), MaxBatch: -3})
			if err != nil {
				return err
			}
			return ok(recvFirst[*djinnpb.PullResponse](s))
		}, "pull batch -3"},
		{"EV.2.3.1 notify of an event whose source id is 17 bytes", listener + "Notify", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			src := proto.Clone(r.mailbox().GetListener()).(*djinnpb.Ref)
			if bad {
				src.ObjectId = make([]byte, 17)
			}
			return ok(djinnpb.NewEventListenerClient(c).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: r.mailbox().GetListener().GetObjectId(), Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: 1}}))
		}, "17 bytes"},
		{"DESIGN.md 8: set attributes with an entry of no type", lookupSvc + "SetAttributes", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			es := item(djinn.NewID(), "named").GetEntries()
			if bad {
				es[0].Type = ""
			}
			return ok(lk(c).SetAttributes(ctx, &djinnpb.AttributesRequest{LeaseCookie: r.lookupItem().GetLease().GetCookie(), Entries: es}))
		}, `type ""`},
		{"DESIGN.md 8: modify attributes with a template and no change", lookupSvc + "ModifyAttributes", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			req := &djinnpb.AttributesRequest{LeaseCookie: r.lookupItem().GetLease().GetCookie(), Templates: []*djinnpb.EntryTemplate{{Type: "Name"}}, Entries: item(djinn.NewID(), "x").GetEntries()}
			if bad {
				req.Entries = nil
			}
			return ok(lk(c).ModifyAttributes(ctx, req))
		}, "1 templates and 0 changes"},
		{"DESIGN.md 8: lock in mode 99", lockSvc + "Lock", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			m := djinnpb.LockMode_LOCK_MODE_READ
			if bad {
				m = 99
			}
			return ok(ls(c).Lock(ctx, &djinnpb.LockRequest{SetId: r.lockSet().GetSetId(), Holder: r.ownerHolder(), Mode: m, Try: true}))
		}, "mode 99"},
		{"DESIGN.md 8: unlock by an owner cookie of 17 bytes", lockSvc + "Unlock", false, func(ctx context.Context, c grpc.ClientConnInterface, r *resources, bad bool) error {
			h := r.ownerHolder()
			if bad {
				h.Owner = make([]byte, 17)
			}
			return ok(ls(c).Unlock(ctx, &djinnpb.UnlockRequest{SetId: r.heldSet(), Holder: h, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}))
		}, "lock owner: 17 bytes"},
	} {
		ps := paths
		if row.stream {
			ps = paths[:1]
		}
		for _, p := range ps {
			owners := &resources{t: t, owner: e.conns[asOwner], srv: e.srv, caller: asOwner}
			never := neverResources(t, e, owners)
			call := func(id identity, r *resources, bad bool) error {
				ctx, cancel := context.WithTimeout(context.Background(), matrixTimeout)
				defer cancel()
				r.caller = id
				return row.call(ctx, p.conn(e.conns[id]), r, bad)
			}
			for _, c := range []struct {
				who string
				err error
			}{
				{"(a) another principal on an unknown id", call(asOther, never, true)},
				{"(b) another principal on the owner's", call(asOther, owners, true)},
				{"(c) the owner on its own", call(asOwner, owners, true)},
			} {
				if djinn.KindOf(c.err) != djinn.InvalidArgument || !strings.Contains(c.err.Error(), row.value) {
					t.Errorf("%s%s, %s: %v; want InvalidArgument naming %q", row.name, p.name, c.who, c.err, row.value)
				}
			}
			if access[row.method] != server.Owner || row.stream {
				continue
			}
			a, b := call(asOther, never, false), call(asOther, owners, false)
			if !slices.Contains(notFoundKinds, djinn.KindOf(a)) || !sameButIDs(a, b) {
				t.Errorf("%s%s well formed, as another principal: on an unknown id %v, on the owner's %v; want not found, alike", row.name, p.name, a, b)
			}
		}
	}
}

// sameButIDs reports whether two errors are of one kind and say the same
// but for the ids the calls sent (128-bit in hex, transaction ids).
func sameButIDs(a, b error) bool {
	ids := regexp.MustCompile(`[0-9a-f]{32}|\d+`)
	return djinn.KindOf(a) == djinn.KindOf(b) && ids.ReplaceAllString(a.Error(), "ID") == ids.ReplaceAllString(b.Error(), "ID")
}
