// Package bench measures a djinn server running in its own process, the
// way djinn bench runs it: closed-loop loads of clients calling the
// server's services through the generated gRPC clients or the client
// library, and one-off measurements (memory per lock set or lookup item,
// notify fan-out, discovery time, lease renewal at scale).
//
// Every workload is a Bench: Check tests its settings before anything is
// dialled, Run measures and returns a Report of Results. One runner, Load,
// drives every closed-loop workload: n clients, each calling a Step in a
// loop for a duration; a step records what it completed in its client's
// Recorder, so only completed work is counted. A Load either cancels the
// step under way when the time is up (the call's cost is cut short and not
// counted) or lets it finish within a slack (for workloads whose steps must
// not be cut: a lock held, a transaction half done). Each throughput
// workload is preceded by the plain gRPC empty call (a health check) at the
// same concurrency, its Baseline: the ceiling of the server, the
// connections and this load generator together.
//
// One printer, Print, writes any Result: ops/s with p50 and p99, named
// phases, figures, the baseline, and Checks. A Check is a condition on what
// was measured: a must (a fence violated, a lease lapsed, a lookup that
// found the wrong item: Report.Verdict turns its failure into an error) or
// a target (a rate the issue asked for: printed, never an error).
//
// The bench's own clean-up — cancelling the leases of what it created —
// runs however a workload ends, so a server can take several runs in a row.
package bench
