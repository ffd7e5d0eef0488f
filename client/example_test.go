package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/client/clienttest"
)

// A listener is one call away; anyone holding its reference can send it
// events.
func ExampleListen() {
	ctx := context.Background()
	got := make(chan *client.RemoteEvent, 1)
	l, err := client.Listen(ctx, "127.0.0.1:0", func(ctx context.Context, ev *client.RemoteEvent) error {
		got <- ev // note the event and return quickly
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	// The sender: usually a djinn service, given l.Ref() at registration.
	pool := client.NewPool()
	defer pool.Close()
	source := djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}
	ev := &client.RemoteEvent{Source: source, ID: 7, Seq: 1, Handback: []byte("my-registration")}
	if err := client.Notify(ctx, pool, l.Ref(), ev); err != nil {
		log.Fatal(err)
	}
	in := <-got
	fmt.Printf("event %d #%d handback %q\n", in.ID, in.Seq, in.Handback)

	// A listener that wants no more of a kind of event says so, and the
	// sender sees djinn.ErrUnknownEvent.
	picky, err := l.AddListener(func(context.Context, *client.RemoteEvent) error {
		return djinn.ErrUnknownEvent
	})
	if err != nil {
		log.Fatal(err)
	}
	err = client.Notify(ctx, pool, picky.Ref(), ev)
	fmt.Println("stop sending:", errors.Is(err, djinn.ErrUnknownEvent))
	// Output:
	// event 7 #1 handback "my-registration"
	// stop sending: true
}

// grantLease stands in for a service call that returns a lease: the lease is
// read with the time the request was sent.
func grantLease(landlord *clienttest.Landlord, d time.Duration) *client.Lease {
	sent := time.Now()
	pb, err := landlord.Grant(d)
	if err != nil {
		log.Fatal(err)
	}
	l, err := client.LeaseFromProto(pb, sent)
	if err != nil {
		log.Fatal(err)
	}
	return l
}

// Leases of one landlord renew together in one round trip; the ones that
// fail leave the map and are reported one by one.
func ExampleLeaseMap() {
	ctx := context.Background()
	landlord := clienttest.NewLandlord(5*time.Minute, time.Hour)
	stop, err := landlord.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	c, err := client.Dial(ctx, landlord.Ref().Endpoint)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := client.NewLeaseMap()
	var leases []*client.Lease
	for range 3 {
		l := grantLease(landlord, time.Minute)
		leases = append(leases, l)
		if err := m.Put(l, 10*time.Minute); err != nil {
			log.Fatal(err)
		}
	}
	landlord.Forget(leases[2].Cookie()) // it expired meanwhile

	err = m.RenewAll(ctx, c)
	var lme *client.LeaseMapError
	if errors.As(err, &lme) {
		for l, err := range lme.Failed {
			fmt.Println("lost the third lease:", l == leases[2], errors.Is(err, djinn.ErrUnknownLease))
		}
	}
	fmt.Println("still in the map:", m.Len())
	fmt.Println("renewed for:", time.Until(leases[0].Expiration()).Round(time.Minute))
	// Output:
	// lost the third lease: true true
	// still in the map: 2
	// renewed for: 10m0s
}

// A Renewer keeps leases alive in the background and speaks up only when
// it cannot.
func ExampleRenewer() {
	// Leases of a second, so that the example runs quickly.
	landlord := clienttest.NewLandlord(time.Second, time.Second)
	stop, err := landlord.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	pool := client.NewPool()
	defer pool.Close()

	failures := make(chan client.Failure, 1)
	r, err := client.NewRenewer(pool, client.WithFailureHandler(func(f client.Failure) {
		failures <- f
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	l := grantLease(landlord, djinn.Any)
	if err := r.Renew(l, djinn.EndOfTime); err != nil { // until further notice
		log.Fatal(err)
	}
	for call := range landlord.Calls() {
		if call.Method == "RenewAll" {
			fmt.Println("renewed in the background")
			break
		}
	}

	landlord.Forget(l.Cookie()) // the landlord lost the lease
	f := <-failures
	fmt.Println("renewal failed:", f.Lease == l, errors.Is(f.Err, djinn.ErrUnknownLease))
	// Output:
	// renewed in the background
	// renewal failed: true true
}

// A lease prints as a token that can be passed around and parsed back.
func ExampleParseToken() {
	landlord := clienttest.NewLandlord(time.Minute, time.Hour)
	l := grantLease(landlord, time.Minute)

	token := l.Token()
	back, err := client.ParseToken(token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same lease:", back.Equal(l))

	_, err = client.ParseToken("djinn-lease:not*base64")
	fmt.Println(err)
	// Output:
	// same lease: true
	// lease token "djinn-lease:not*base64": not unpadded base64url: illegal base64 data at input byte 3
}
