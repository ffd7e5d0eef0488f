package kv_test

import (
	"context"
	"fmt"
	"os"

	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

// A key/value store over a FileStore. Under a transaction, a write is seen
// only inside the transaction until the manager commits it. (Here an
// in-memory manager stands in for djinn's, and the test drives the two
// phases as the manager would; a real program passes participant.Remote(pool)
// and serves db with participant.NewServer and kv.NewServer.)
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "kv-example")
	defer os.RemoveAll(dir)
	store, err := participant.OpenFileStore(dir)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	mgr := participanttest.NewManager()
	db, err := kv.Open(kv.Config{Participant: participant.Config{
		Endpoint: "127.0.0.1:4161", Store: store, Managers: mgr,
	}})
	if err != nil {
		panic(err)
	}
	defer db.Close()

	_ = db.Put(ctx, nil, "balance", []byte("100")) // at once, durably
	tx := mgr.Create()
	_ = db.Put(ctx, &tx, "balance", []byte("90"))

	inside, _, _ := db.Get(ctx, &tx, "balance")
	outside, _, _ := db.Get(ctx, nil, "balance")
	fmt.Printf("inside %s, outside %s\n", inside, outside)

	vote, _ := db.Participant().Prepare(ctx, tx) // the manager's first phase
	_ = db.Participant().Commit(ctx, tx)         // and its second
	after, _, _ := db.Get(ctx, nil, "balance")
	fmt.Printf("voted %v; after commit %s\n", vote, after)
	// Output:
	// inside 90, outside 100
	// voted PREPARED; after commit 90
}

// Each caller its own keys: a DB's namespaces. A server gives each call
// its caller's with kv.NewServer(db, kv.WithNamespace(f)), f naming the
// caller its authentication put in the call's context.
func ExampleDB_Space() {
	ctx := context.Background()
	db, err := kv.Open(kv.Config{Participant: participant.Config{
		Endpoint: "127.0.0.1:4161", Store: participant.NewMemStore(), Managers: participanttest.NewManager(),
	}})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	alice, bob := db.Space("alice"), db.Space("bob")

	_ = alice.Put(ctx, nil, "greeting", []byte("hello"))
	_, found, _ := bob.Get(ctx, nil, "greeting")    // not bob's: not found
	_ = bob.Put(ctx, nil, "greeting", []byte("hi")) // bob's own key
	mine, _, _ := alice.Get(ctx, nil, "greeting")
	fmt.Printf("bob found alice's: %v; alice's: %s\n", found, mine)
	// Output:
	// bob found alice's: false; alice's: hello
}
