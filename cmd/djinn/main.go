// Command djinn is the djinn server and its command-line client.
//
//	djinn serve            run a server (every service, loopback defaults)
//	djinn status           what a server is doing
//	djinn lease …          show, renew and cancel leases
//	djinn mailbox …        event mailbox registrations
//	djinn events …         host a listener, send an event
//	djinn renewal …        lease renewal sets
//	djinn txn …            create, nest, show, commit and abort transactions
//	djinn kv …             the key/value store, under a transaction or not
//	djinn lock …           lock sets, owners, acquire/release/change, show
//	djinn lookup …         register, find, watch and browse services (djinn discover: find registrars)
//	djinn lds …            the lookup discovery service: registrations, their groups, locators, registrars
//	djinn demo transfer    one transaction across two servers' key/value stores
//	djinn bench …          measure a running server (package internal/bench)
//	djinn repair           make a damaged data directory start again, saying what it drops
//
// main hands off to Main; each command group has its file.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main{Stdout: os.Stdout, Stderr: os.Stderr}.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
