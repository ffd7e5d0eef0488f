package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// principals is a server under mutual TLS and connections to it as two
// principals, alice and bob.
type principals struct {
	srv        *server.Server
	alice, bob *grpc.ClientConn
}

func newPrincipals(t *testing.T) principals {
	t.Helper()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	srv := servertest.Start(t, cfg)
	as := func(cn string) *grpc.ClientConn {
		return servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, cn)))).ClientConn()
	}
	return principals{srv: srv, alice: as("alice"), bob: as("bob")}
}

func item(id djinn.ID, name string) *djinnpb.ServiceItem {
	return &djinnpb.ServiceItem{ServiceId: id[:], Service: []byte("printer"), Types: []string{"Printer"},
		Entries: []*djinnpb.Entry{{Type: "Name", Fields: []*djinnpb.Field{{Name: "name", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: name}}}}}}}
}

// TestLookupRegistrationsStayTheirOwners (issue 17, finding 2): a second
// principal registering under the first's service id — which any lookup
// shows — is refused without a word about the item, and the owner's item,
// lease and attributes stay; the owner may register it again.
func TestLookupRegistrationsStayTheirOwners(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	alice, bob := djinnpb.NewLookupServiceClient(p.alice), djinnpb.NewLookupServiceClient(p.bob)
	id := djinn.NewID()
	reg, err := alice.Register(testContext(t), &djinnpb.RegisterRequest{Item: item(id, "alice's"), LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Register(testContext(t), &djinnpb.RegisterRequest{Item: item(id, "bob's"), LeaseDurationNanos: int64(time.Minute)})
	wantErr(t, "bob registers under alice's service id", err, djinn.ErrPermissionDenied, "another principal")
	if err != nil && (strings.Contains(err.Error(), "alice") || strings.Contains(err.Error(), "cn:")) {
		t.Errorf("the refusal names the owner: %v", err)
	}

	cookie := reg.GetLease().GetCookie()
	_, err = bob.AddAttributes(testContext(t), &djinnpb.AttributesRequest{LeaseCookie: cookie, Entries: item(id, "x").GetEntries()})
	wantErr(t, "bob changes alice's attributes with her cookie", err, djinn.ErrUnknownLease, "")
	_, err = djinnpb.NewLandlordClient(p.bob).Cancel(testContext(t), &djinnpb.CancelRequest{Cookie: cookie})
	wantErr(t, "bob cancels alice's registration with her cookie", err, djinn.ErrUnknownLease, "")

	got := lookupName(t, bob, id)
	if got != "alice's" {
		t.Fatalf("the item under alice's id names %q, want alice's", got)
	}
	if _, err := djinnpb.NewLandlordClient(p.alice).Renew(testContext(t), &djinnpb.RenewRequest{Cookie: cookie, DurationNanos: int64(time.Minute)}); err != nil {
		t.Fatalf("alice renews her registration: %v", err)
	}
	if _, err := alice.Register(testContext(t), &djinnpb.RegisterRequest{Item: item(id, "alice's, again"), LeaseDurationNanos: int64(time.Minute)}); err != nil {
		t.Fatalf("alice registers her item again: %v", err)
	}
	if got := lookupName(t, bob, id); got != "alice's, again" {
		t.Fatalf("after alice registered again the item names %q", got)
	}
}

// lookupName returns the name entry of the item registered under id.
func lookupName(t *testing.T, c djinnpb.LookupServiceClient, id djinn.ID) string {
	t.Helper()
	resp, err := c.Lookup(testContext(t), &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{ServiceId: id[:]}, MaxMatches: 1})
	if err != nil || len(resp.GetItems()) != 1 {
		t.Fatalf("lookup %s: %v, %d items", id, err, len(resp.GetItems()))
	}
	return resp.GetItems()[0].GetEntries()[0].GetFields()[0].GetValue().GetStringValue()
}

// TestLockSetLeaseIsItsCreators (issue 17, finding 3): whoever knows a
// lock set's id may lock in it and describe it, but only its creator sees
// its lease; another principal holding the cookie cannot end the set.
func TestLockSetLeaseIsItsCreators(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	alice, bob := djinnpb.NewLockServiceClient(p.alice), djinnpb.NewLockServiceClient(p.bob)
	set, err := alice.CreateSet(testContext(t), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	d, err := bob.Describe(testContext(t), &djinnpb.LockSetRequest{SetId: set.GetSetId()})
	if err != nil {
		t.Fatalf("bob describes a set whose id he knows: %v", err)
	}
	if d.GetLease() != nil {
		t.Fatalf("bob's description carries the set's lease: %v", d.GetLease())
	}
	if d, err := alice.Describe(testContext(t), &djinnpb.LockSetRequest{SetId: set.GetSetId()}); err != nil || d.GetLease() == nil {
		t.Fatalf("alice's description: %v, %v; want her set's lease", d, err)
	}
	_, err = djinnpb.NewLandlordClient(p.bob).Cancel(testContext(t), &djinnpb.CancelRequest{Cookie: set.GetLease().GetCookie()})
	wantErr(t, "bob cancels alice's set with its cookie", err, djinn.ErrUnknownLease, "")
	owner, err := bob.CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Lock(testContext(t), &djinnpb.LockRequest{SetId: set.GetSetId(), Mode: djinnpb.LockMode_LOCK_MODE_WRITE,
		Holder: &djinnpb.LockHolder{Owner: owner.GetLease().GetCookie()}})
	if err != nil {
		t.Fatalf("bob locks in alice's set, whose id she gave him: %v", err)
	}
}

// TestLeaseCookieRenewsButNeverEnds: a lease's cookie lets any holder keep
// the lease alive — as a renewal service does — but ending it, by cancel
// or by a renewal for less than it has left, is its owner's.
func TestLeaseCookieRenewsButNeverEnds(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	alicesReg, err := djinnpb.NewEventMailboxClient(p.alice).Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	bobsReg, err := djinnpb.NewEventMailboxClient(p.bob).Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	alices, bobs := alicesReg.GetLease().GetCookie(), bobsReg.GetLease().GetCookie()
	bob := djinnpb.NewLandlordClient(p.bob)
	if _, err := bob.Renew(testContext(t), &djinnpb.RenewRequest{Cookie: alices, DurationNanos: int64(2 * time.Minute)}); err != nil {
		t.Fatalf("bob extends alice's lease with its cookie: %v", err)
	}
	if _, err := bob.Renew(testContext(t), &djinnpb.RenewRequest{Cookie: alices, DurationNanos: int64(time.Millisecond)}); err != nil {
		t.Fatalf("bob renews alice's lease for 1ms: %v", err)
	}
	// A millisecond later the lease would be gone had bob's renewal
	// shortened it: it is alive, for alice, for most of two minutes.
	if _, err := djinnpb.NewEventMailboxClient(p.alice).GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: alicesReg.GetRegistrationId()}); err != nil {
		t.Fatalf("alice's registration after bob's short renewal: %v", err)
	}
	res, err := bob.CancelAll(testContext(t), &djinnpb.CancelAllRequest{Cookies: append(append([]byte(nil), alices...), bobs...)})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.GetErrors(); len(errs) != 1 || errs[0].GetIndex() != 0 || errs[0].GetError().GetKind() != string(djinn.UnknownLease) {
		t.Fatalf("bob cancels alice's lease and his own: errors %v, want alice's alone, unknown", errs)
	}
	if _, err := djinnpb.NewLandlordClient(p.alice).Renew(testContext(t), &djinnpb.RenewRequest{Cookie: alices, DurationNanos: int64(time.Minute)}); err != nil {
		t.Fatalf("alice's lease after bob's cancels: %v", err)
	}
	if _, err := bob.Renew(testContext(t), &djinnpb.RenewRequest{Cookie: bobs, DurationNanos: int64(time.Minute)}); err == nil {
		t.Fatal("bob's own lease outlived his cancel")
	}
}

// TestLDSRegistrationIsItsCreators: a lookup discovery registration's
// cookie lets another principal renew it, not read or change it.
func TestLDSRegistrationIsItsCreators(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	l, err := client.Listen(t.Context(), "127.0.0.1:0", func(context.Context, *client.RemoteEvent) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg, err := djinnpb.NewLookupDiscoveryServiceClient(p.alice).Register(testContext(t), &djinnpb.LDSRegisterRequest{
		Locators: []string{"jini://127.0.0.1:1"}, Listener: client.RefToProto(l.Ref()), LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	bob := djinnpb.NewLookupDiscoveryServiceClient(p.bob)
	_, err = bob.GetRegistration(testContext(t), &djinnpb.LDSRegistrationRequest{LeaseCookie: reg.GetRegistration().GetLease().GetCookie()})
	wantErr(t, "bob reads alice's registration", err, djinn.ErrNoSuchObject, "")
	_, err = bob.Discard(testContext(t), &djinnpb.LDSDiscardRequest{LeaseCookie: reg.GetRegistration().GetLease().GetCookie(), RegistrarServiceId: idBytes(djinn.NewID())})
	wantErr(t, "bob discards for alice's registration", err, djinn.ErrNoSuchObject, "")
	if _, err := djinnpb.NewLookupDiscoveryServiceClient(p.alice).GetRegistration(testContext(t), &djinnpb.LDSRegistrationRequest{LeaseCookie: reg.GetRegistration().GetLease().GetCookie()}); err != nil {
		t.Fatalf("alice reads her registration: %v", err)
	}
}

// TestTransactionIDIsNoCapability (issue 17, finding 4): whoever learns a
// transaction's id — any principal — cannot join it, change a
// participant's crash count (which aborts it, TX.2.3), ask its state or
// tell its participants to abort: the secret its creator holds is the
// capability. The creator's work commits.
func TestTransactionIDIsNoCapability(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	alice, bob := djinnpb.NewTransactionManagerClient(p.alice), djinnpb.NewTransactionManagerClient(p.bob)
	tx, err := alice.Create(testContext(t), &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(tx.GetSecret()) != 16 {
		t.Fatalf("created %v: want a 16-byte secret", tx)
	}
	kvc := kv.NewClient(p.alice)
	ptx := &participant.Tx{Manager: djinn.Ref{Endpoint: tx.GetManager().GetEndpoint(), Service: djinn.ID(tx.GetManager().GetServiceId()), Object: djinn.ID(tx.GetManager().GetObjectId())},
		ID: tx.GetId(), Secret: djinn.ID(tx.GetSecret())}
	if err := kvc.Put(testContext(t), ptx, "k", []byte("alice's")); err != nil {
		t.Fatal(err)
	}
	stranger := client.RefToProto(djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()})
	for _, secret := range [][]byte{nil, idBytes(djinn.NewID())} {
		_, err = bob.Join(testContext(t), &djinnpb.JoinTransactionRequest{Id: tx.GetId(), Secret: secret, Participant: stranger, CrashCount: 1})
		wantErr(t, "bob joins alice's transaction by its id", err, djinn.ErrUnknownTransaction, "")
		_, err = bob.GetState(testContext(t), &djinnpb.TransactionRequest{Id: tx.GetId(), Secret: secret})
		wantErr(t, "bob asks its state", err, djinn.ErrUnknownTransaction, "")
		// The key/value participant joined: bob tells it to abort.
		d, err := alice.Describe(testContext(t), &djinnpb.TransactionRequest{Id: tx.GetId()})
		if err != nil || len(d.GetParticipants()) != 1 {
			t.Fatalf("describe: %v, %v; want the key/value participant", d, err)
		}
		part := d.GetParticipants()[0].GetParticipant()
		_, err = djinnpb.NewTransactionParticipantClient(p.bob).Abort(testContext(t), &djinnpb.ParticipantRequest{
			ParticipantId: part.GetObjectId(), Manager: tx.GetManager(), Id: tx.GetId(), Secret: secret})
		wantErr(t, "bob tells alice's participant to abort", err, djinn.ErrUnknownTransaction, "")
	}
	if _, err := alice.Commit(testContext(t), &djinnpb.CompleteTransactionRequest{Id: tx.GetId()}); err != nil {
		t.Fatalf("alice commits: %v", err)
	}
	servertest.Eventually(t, "alice's committed write", func() bool {
		v, ok, err := kvc.Get(testContext(t), nil, "k")
		return err == nil && ok && string(v) == "alice's"
	})
}
