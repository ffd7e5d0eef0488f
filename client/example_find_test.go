package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/service"
)

// exampleLookupServer runs a djinn server whose lookup service answers
// unicast discovery on a port of its own, and returns its locator and a
// function that stops it.
func exampleLookupServer(ctx context.Context) (string, func()) {
	dir, err := os.MkdirTemp("", "djinn-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.Default()
	cfg.DataDir, cfg.Listen, cfg.Admin, cfg.Raft, cfg.Lookup.Discovery = dir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s, err := server.Open(ctx, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	stop := func() {
		s.Close()
		os.RemoveAll(dir)
	}
	c, err := client.Dial(ctx, s.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for {
		if r, err := c.Lookup(ctx); err == nil {
			if info, err := r.Info(ctx); err == nil && info.Locator != "" {
				return info.Locator, stop
			}
		}
		select {
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A client finds djinn's services as Jini clients do: it discovers lookup
// services and asks them for a service of a type, without knowing where
// the service is. Here the lookup service is found at its locator; on a
// network with multicast, client.InGroups("prod") is all it takes (the
// servers run with --multicast --groups prod).
func ExampleFind() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	locator, stop := exampleLookupServer(ctx)
	defer stop()

	found, err := client.Find(ctx, service.TransactionManagerType, client.AtLocators(locator))
	if err != nil {
		log.Fatal(err)
	}
	defer found.Close()
	mgr, err := found.TransactionManager()
	if err != nil {
		log.Fatal(err)
	}
	tx, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("found a", found.Item.Types[0], "and committed a transaction there")

	inbox, err := client.Find(ctx, service.EventMailboxType, client.AtLocators(locator))
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Close()
	mailbox, err := inbox.Mailbox()
	if err != nil {
		log.Fatal(err)
	}
	reg, err := mailbox.Register(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("found an event mailbox; registered:", reg.Lease != nil)
	// Output:
	// found a djinn.TransactionManager and committed a transaction there
	// found an event mailbox; registered: true
}
