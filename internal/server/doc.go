// Package server assembles a djinn server: the replicated state machine and
// its Raft node, the service cores, their gRPC adapters (the only place where
// service errors become gRPC statuses, through internal/grpcerr), the admin
// HTTP endpoints (/healthz, /readyz, /metrics, pprof) and TLS.
//
// Leader-only work starts when the node gains leadership and stops when it
// loses it: the lessor's expiry and checkpoint loops and the mailbox's
// delivery. On followers every service call answers Unavailable with the
// leader's address in the "djinn-leader" trailer, which the client library
// follows.
package server
