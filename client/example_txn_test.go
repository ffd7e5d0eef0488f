package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
)

// exampleServer runs a djinn server on loopback ports for an example and
// returns its address and a function that stops it.
func exampleServer(ctx context.Context) (string, func()) {
	dir, err := os.MkdirTemp("", "djinn-example")
	if err != nil {
		log.Fatal(err)
	}
	cfg := server.Default()
	cfg.DataDir, cfg.Listen, cfg.Admin, cfg.Raft = dir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Raftcfg.HeartbeatTimeout = server.Duration(100 * time.Millisecond)
	cfg.Raftcfg.ElectionTimeout = server.Duration(100 * time.Millisecond)
	s, err := server.Open(ctx, cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	return s.Addr(), func() {
		s.Close()
		os.RemoveAll(dir)
	}
}

// A transaction is created at a manager, travels with the context of the
// work done under it, and ends with commit or abort.
func ExampleTransactionManager_Create() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr, stop := exampleServer(ctx)
	defer stop()

	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		log.Fatal(err)
	}
	tx, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}

	// Work under the transaction: the services called with wctx find it
	// in the call's metadata and join it.
	wctx := client.WithTransaction(ctx, tx)
	cur, _ := client.TransactionFrom(wctx)
	fmt.Println("current transaction is tx:", cur.Equal(tx))

	// Commit, waiting until every participant has been told.
	err = tx.CommitWait(ctx, 10*time.Second)
	var de *djinn.Error
	if errors.As(err, &de) && de.Kind == djinn.TimeoutExpired {
		fmt.Println("not every participant told yet; committed:", de.Committed)
	} else if err != nil {
		log.Fatal(err)
	}
	st, err := tx.State(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("state:", st)
	fmt.Println("abort after commit:", errors.Is(tx.Abort(ctx), djinn.ErrCannotAbort))
	// Output:
	// current transaction is tx: true
	// state: COMMITTED
	// abort after commit: true
}
