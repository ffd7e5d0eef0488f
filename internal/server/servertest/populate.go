package servertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/service"
)

// Population is state in every service of one server, made by Populate:
// what a console, a dashboard or a status page should show.
type Population struct {
	// Mailbox is a registration storing the lookup and lookup discovery
	// events below: it holds at least one.
	Mailbox *client.MailboxRegistration
	// Renewal is a renewal set renewing the lock owner's lease.
	Renewal *client.RenewalSet
	// Txn is an active transaction that the key/value participant joined
	// (TxnKey, a key of its own, written under it).
	Txn    *client.Transaction
	TxnKey string
	// LockSet has its lock held in write mode by LockOwner.
	LockSet   *client.LockSet
	LockOwner *client.LockOwner
	// Item is a lookup registration of type ItemType whose Name entry
	// says ItemName; a watch for that type notifies the mailbox.
	Item               *client.ServiceRegistration
	ItemType, ItemName string
	Watch              *client.EventRegistration
	// LDS is a lookup discovery registration for group LDSGroup and the
	// server's own lookup service's locator (it discovers that one), whose
	// events go to the mailbox.
	LDS      *client.LDSRegistration
	LDSGroup string
	// Key holds a committed key/value pair.
	Key string
}

// Populate makes state in every service of the server c talks to, with
// leases of d, and returns it. kvAddr is the server whose key/value
// participant it writes to.
func Populate(t testing.TB, c *client.Client, kvAddr string, d time.Duration) *Population {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	p := &Population{ItemType: "Printer", ItemName: "laser", LDSGroup: "djinn-test", Key: "console/key"}
	var err error
	check := func(what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("populate: %s: %v", what, err)
		}
	}
	p.Mailbox, err = c.Mailbox().Register(ctx, d)
	check("mailbox registration")
	reg, err := c.Lookup(ctx)
	check("lookup service")
	p.Watch, err = reg.Notify(ctx, client.ServiceTemplate{Types: []string{p.ItemType}}, client.NoMatchMatch|client.MatchNoMatch|client.MatchMatch, p.Mailbox.Listener, []byte("watch"), d)
	check("lookup watch")
	p.Item, err = reg.Register(ctx, client.ServiceItem{
		Service: []byte("printer.example:631"),
		Types:   []string{p.ItemType},
		Entries: []service.Entry{{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(p.ItemName)}}}},
	}, d)
	check("lookup registration")
	ldsSvc, err := c.LookupDiscovery(ctx)
	check("lookup discovery service")
	// The registration finds this server's own lookup service by its
	// locator, when it serves discovery.
	info, err := reg.Info(ctx)
	check("lookup service info")
	var locators []string
	if info.Locator != "" {
		locators = []string{info.Locator}
	}
	p.LDS, err = ldsSvc.Register(ctx, client.GroupsOf(p.LDSGroup), locators, p.Mailbox.Listener, []byte("lds"), d)
	check("lookup discovery registration")
	locks, err := c.LockService(ctx)
	check("lock service")
	p.LockSet, err = locks.CreateSet(ctx, client.LockSetOptions{Lease: d})
	check("lock set")
	p.LockOwner, err = locks.CreateOwner(ctx, d)
	check("lock owner")
	_, err = p.LockSet.Lock(ctx, client.HeldByOwner(p.LockOwner), client.LockW)
	check("lock")
	p.Renewal, err = c.RenewalService().CreateSet(ctx, d)
	check("renewal set")
	err = p.Renewal.RenewForDesired(ctx, p.LockOwner.Lease(), 10*d)
	check("renewal set lease")
	mgr, err := c.TransactionManager(ctx)
	check("transaction manager")
	p.Txn, err = mgr.Create(ctx, d)
	check("transaction")
	p.TxnKey = fmt.Sprintf("console/txn/%d", p.Txn.ID())
	conn, err := c.Conn(kvAddr)
	check("key/value connection")
	kvc := kv.NewClient(conn)
	err = kvc.Put(ctx, participant.TxOf(p.Txn), p.TxnKey, []byte("pending"))
	check("key/value write under the transaction")
	err = kvc.Put(ctx, nil, p.Key, []byte("committed"))
	check("key/value write")
	return p
}
