package main

import (
	"encoding/json"
	"testing"

	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
)

// storedAt reads key from the key/value store of the server at addr
// alone: whether it holds it.
func storedAt(t *testing.T, addr, key string) bool {
	t.Helper()
	conn, err := servertest.Dial(t, addr).Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	_, found, err := kv.NewClient(conn).Get(t.Context(), nil, key)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestCLIKVAtFollower: kv works on the key/value store of --server itself
// (each node's own, not replicated), also when --server is a follower
// just added to a cluster: its writes land there, not at the leader, and
// its reads find them there.
func TestCLIKVAtFollower(t *testing.T) {
	leader := servertest.Start(t, servertest.Config(t))
	follower := servertest.OpenWaiting(t, leader) // no service id until a member adds it
	if o, errs, ok := runAt(t, leader.Addr(), "member", "add", follower.NodeID(), "--raft", follower.RaftAddr(), "--grpc", follower.Addr(),
		"--join-secret-file", servertest.SecretFile(leader)); !ok {
		t.Fatalf("member add: %s%s", o, errs)
	}
	servertest.WaitReady(t, follower)
	if o, errs, ok := runAt(t, follower.Addr(), "kv", "put", "greeting", "hello"); !ok {
		t.Fatalf("kv put at the follower: %s%s", o, errs)
	}
	if !storedAt(t, follower.Addr(), "greeting") || storedAt(t, leader.Addr(), "greeting") {
		t.Fatalf("kv put --server %s (a follower): held by the follower %v, by the leader %v; want the follower's store alone",
			follower.Addr(), storedAt(t, follower.Addr(), "greeting"), storedAt(t, leader.Addr(), "greeting"))
	}
	if o, errs, ok := runAt(t, follower.Addr(), "kv", "get", "greeting"); !ok || o != "hello\n" {
		t.Errorf("kv get at the follower: ok=%v %q %q; want hello", ok, o, errs)
	}
	// Under a transaction of the cluster's manager: the command asks the
	// manager first, through the leader, and still writes at --server.
	tok, errs, ok := runAt(t, leader.Addr(), "txn", "create", "--lease", "1m", "-o", "json")
	var c txnCreatedJSON
	if !ok || json.Unmarshal([]byte(tok), &c) != nil {
		t.Fatalf("txn create: %s%s", tok, errs)
	}
	if o, errs, ok := runAt(t, follower.Addr(), "kv", "put", "under", "txn", "--txn", c.Token); !ok {
		t.Fatalf("kv put --txn at the follower: %s%s", o, errs)
	}
	if o, errs, ok := runAt(t, leader.Addr(), "txn", "commit", c.Token, "--wait", "30s"); !ok { // once told, the participant holds it
		t.Fatalf("txn commit: %s%s", o, errs)
	}
	if !storedAt(t, follower.Addr(), "under") || storedAt(t, leader.Addr(), "under") {
		t.Errorf("kv put --txn --server %s (a follower), committed: held by the follower %v, by the leader %v; want the follower's store alone",
			follower.Addr(), storedAt(t, follower.Addr(), "under"), storedAt(t, leader.Addr(), "under"))
	}
}
