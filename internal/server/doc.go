// Package server assembles a djinn server: the replicated state machine and
// its Raft node, the service cores, their gRPC adapters (the only place where
// service errors become gRPC statuses, through internal/grpcerr), the admin
// HTTP endpoints (/healthz, /readyz, /metrics, pprof) and TLS.
//
// Every service is a part (part.go), defined in its own file beside its
// gRPC adapter: how its replicated state joins the state machine, how its
// core opens and closes, its leader work, its metrics, its status and its
// configuration section. The server iterates the list of parts for each of
// these; nothing else names a service. Adding one is a file here, a line in
// the list, its package and its proto.
//
// Who may call what is decided in one place (rule.go, DESIGN.md 7): a part
// registers each gRPC service with a rule for every method — Public,
// Authenticated, Owner (with the service's ownership hook), Capability,
// Operator or Peer — the server refuses to start with a method that has
// none, and the edge interceptor (edge.go) looks the rule up on every call.
//
// Services are found through lookup services (join.go, joiner.go): every
// part that declares a joinKind keeps an item registered at the lookup
// services it discovers — the cluster's services by the leader, under
// service ids the cluster keeps, a node's own by that node — through
// package lookup's JoinManager, as the replicated join settings say.
//
// Every unary RPC is also served in a session (session.go): one stream per
// connection carries calls of every service by id, answered as they
// finish; each runs the same interceptor chain as its unary call, so its
// rule, its errors and leader hint, its limits and its metrics are the
// unary call's. Sessions' calls run on workers kept from call to call.
//
// Leader-only work starts when the node gains leadership and stops when it
// loses it: each enabled part's run (the lessor's expiry and checkpoint
// loops, the mailbox's delivery, the transaction manager's phase 2, …). On
// followers every service call answers Unavailable with the leader's address
// in the "djinn-leader" trailer, which the client library follows.
package server
