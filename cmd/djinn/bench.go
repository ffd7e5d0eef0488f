package main

import (
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/bench"
)

// The bench commands: each reads its flags into a workload of package
// bench and runs it with runBench, which prints every result the same way.

const benchHelp = `Measure a djinn server running in its own process.

Workloads (--ops): empty (gRPC health check: the floor every call pays),
renew (one lease per client), renewstream (renewals over one stream per
client), renewall (--batch leases per call), register
(mailbox registration: a logged lease grant), notify (durable mailbox
ingest, one event a call), notifybatch (--events per call), deliver (ingest with delivery enabled to a listener hosted by the
bench; reports events received per second), deliverbatch (the same,
--events per call), deliverstream (ingest, one event a call, each
registration's events taken by the bench with the client library's
Receive: the registrations of a connection share its delivery stream,
acknowledged on the stream; reports events received per second),
deliverstreambatch (the same, --events per call), leases (grants --leases
registrations and reports the server's resident memory from --admin).
With --admin, the deliver workloads also report, from the server's
counters, the events per delivery call or the stream messages sent and
acknowledgements received per event.`

func (g *globals) benchCmd() *cobra.Command {
	b := &bench.Calls{}
	var ops, clients, profile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running server: ops/s with p50/p99 at several concurrencies",
		Long:  benchHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.Levels, err = bench.ParseClients(clients); err != nil {
				return usageError{err}
			}
			b.Ops = bench.SplitList(ops)
			return g.runBench(cmd, b)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", "empty,renew,renewall,register,notify,deliver", "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.Duration, "for", 5*time.Second, "time per measurement")
	alias(f, "duration", "for")
	f.IntVar(&b.Batch, "batch", 1000, "leases per renewall call")
	f.IntVar(&b.Leases, "leases", 1000000, "registrations for the leases workload")
	f.StringVar(&b.Admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&b.Events, "events", 100, "events per notifybatch call")
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write this process's CPU profile (the load generator's) to FILE")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return profileCPU(cmd, profile) }
	cmd.AddCommand(g.benchRenewalCmd(), g.benchTxnCmd(), g.benchLockCmd(), g.benchLookupCmd(), g.benchLDSCmd(), benchPlainServerCmd())
	return cmd
}

// profileCPU profiles this process's CPU into the file at path until the
// command ends, errors included; with an empty path it does nothing.
func profileCPU(cmd *cobra.Command, path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile %s: %w", path, err)
	}
	cobra.OnFinalize(func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "cpu profile:", err)
		}
	})
	return nil
}

// runBench checks b's settings, runs it against --server and prints its
// results as they come (text) or all at the end (JSON). It fails when b
// fails, or when a must of a result failed.
func (g *globals) runBench(cmd *cobra.Command, b bench.Bench) error {
	if err := b.Check(); err != nil {
		return usageError{err} // every setting it checks is a flag's
	}
	if eps, err := client.SplitEndpoints(g.server); err != nil || len(eps) == 0 {
		if err == nil {
			err = djinn.Errorf(djinn.InvalidArgument, "no endpoint given")
		}
		return usageError{fmt.Errorf("--server: %w", err)}
	}
	if g.waitTimeout == 0 { // asked once: a bench never measures a server still starting
		c, err := g.dialReady(cmd)
		if err != nil {
			return err
		}
		c.Close()
	}
	env := bench.Env{Server: g.server, Dial: g.dialAt, Progress: cmd.ErrOrStderr(), ReadyWait: g.waitTimeout, Plain: plainProcess()}
	if !g.structured() {
		env.Result = func(r bench.Result) { bench.Print(cmd.OutOrStdout(), r) }
	}
	rep, err := b.Run(cmd.Context(), env)
	if g.structured() && len(rep.Results) > 0 {
		if perr := g.print(cmd.OutOrStdout(), rep, nil); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return notReadyHint(err)
	}
	return rep.Verdict()
}

const benchRenewalHelp = `Measure the lease renewal service of a djinn server running in its own
process (--server, with its admin endpoint at --admin).

The bench hosts --landlords landlords that grant leases of at most
--client-lease, creates --sets renewal sets with a renewal failure
listener hosted here, and adds --leases client leases (spread evenly over
sets and landlords) with renewFor(lease, Forever), --clients calls at a
time. It then watches for --for: the server's CPU and resident memory,
the renewal calls the landlords receive, lapses (a lease the landlords saw
expire) and renewal failure events. It exits non-zero when a lease lapsed,
a failure event arrived, or a set lost a lease.

The issue's configuration is the default; a quick check is
  djinn bench renewal --leases 20000 --sets 200 --for 30s --client-lease 10s`

func (g *globals) benchRenewalCmd() *cobra.Command {
	b := &bench.Renewal{}
	var setLease string
	cmd := &cobra.Command{
		Use:   "renewal",
		Short: "Keep client leases alive through the lease renewal service and count lapses",
		Long:  benchRenewalHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := djinn.ParseDuration(setLease)
			if err != nil {
				return usageError{fmt.Errorf("--set-lease: %w", err)}
			}
			b.SetLease = d
			return g.runBench(cmd, b)
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.Leases, "leases", 1_000_000, "client leases to keep alive")
	f.IntVar(&b.Sets, "sets", 10_000, "renewal sets the leases are spread over")
	f.IntVar(&b.Landlords, "landlords", 4, "landlords hosted by the bench, granting the leases")
	f.DurationVar(&b.LeaseDuration, "client-lease", time.Minute, "the longest lease the landlords grant their clients")
	alias(f, "lease-duration", "client-lease")
	f.DurationVar(&b.RunFor, "for", 10*time.Minute, "steady-state time, after the leases are added")
	alias(f, "run", "for")
	f.DurationVar(&b.Sample, "sample", 5*time.Second, "time between samples of the server and the landlords")
	f.IntVar(&b.Clients, "clients", 64, "concurrent calls while setting up")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections the setup calls share")
	f.StringVar(&b.Admin, "admin", "127.0.0.1:4162", "admin address of the server, for its CPU and memory")
	f.StringVar(&setLease, "set-lease", "forever", "lease asked for each set (the server may grant less; the bench renews it)")
	return cmd
}

const benchTxnHelp = `Measure transactions through the transaction manager of --server.

Each client, in a loop for --for: create a transaction, put two keys
under it to key/value participants (both writes sent at once, as they
are independent), commit. A transaction counts once
every participant has been told its outcome: after the load the bench
waits for the manager to have told them all, checks each transaction of
the run at the manager, and reads a sample of the writes back from the
participants. Reports completed transactions/s beside decided ones
(commits returned), p50/p99 per transaction and per commit call, the
calls per transaction, and the rate as a fraction of the empty gRPC
call's, which it measures on --server at the same concurrency just
before. The run fails when a participant was not told, or when the last
was told more than --lag after the last commit returned (phase 2 fell
behind). At one client it
also measures the register workload (one durable log append) to compare
the commit's latency with a log append and the participants' round trips.

--kv P1,P2 puts the first key on the key/value participant of the djinn
server at P1 and the second on P2's (their transaction managers are not
used): three processes, two participants, prepare and commit to each.
Without --kv both keys go to --server's own participant: one participant,
in the manager's process, which the manager calls in process.

--admin and --kv-admin, when given, name the servers' admin endpoints:
the bench then reads the calls each served from /metrics, and their CPU.

  djinn bench txn --server MGR --kv P1,P2 --admin MGRADMIN --kv-admin P1ADMIN,P2ADMIN
  djinn bench txn --server MGR --admin MGRADMIN`

func (g *globals) benchTxnCmd() *cobra.Command {
	b := &bench.Txn{}
	var clients, kvAddrs, kvAdmins, lease string
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Measure transactions: two key/value writes under one transaction, then commit",
		Long:  benchTxnHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.Lease, err = parseLease(lease); err != nil {
				return err
			}
			if b.Levels, err = bench.ParseClients(clients); err != nil {
				return usageError{err}
			}
			b.KV, b.KVAdmins = bench.SplitList(kvAddrs), bench.SplitList(kvAdmins)
			return g.runBench(cmd, b)
		},
	}
	f := cmd.Flags()
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.Duration, "for", 5*time.Second, "time per measurement")
	alias(f, "duration", "for")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections per server that the clients share")
	f.StringVar(&kvAddrs, "kv", "", "gRPC addresses of the key/value participants, one per write, each written and read back at that server itself (default: --server)")
	f.StringVar(&b.Admin, "admin", "", "admin address of --server, to read the calls it served (optional)")
	f.StringVar(&kvAdmins, "kv-admin", "", "admin addresses of the --kv servers, in the same order (optional)")
	f.StringVar(&lease, "lease", "1m", "lease asked for each transaction: a positive Go duration, forever or any (the server grants at most its maximum)")
	f.DurationVar(&b.Lag, "lag", 0, "how long after the last commit every participant must have been told (0: a ninth of the run's time, at least 500ms)")
	return cmd
}

const benchLockHelp = `Measure the lock service of a djinn server running in its own process.

Workloads (--ops):
  uncontended  each client its own lock set and owner, looping lock(W) +
               unlock(W); reports cycles/s (2 calls each) and p50/p99 per cycle
  contended    one lock set, an owner per client, each looping a blocking
               lock(W) then unlock(W); reports grants/s (hand-offs, 2 calls
               each), p50/p99 of the wait for a grant, and fence violations
               (a grant overlapping another, told by the fencing tokens:
               must be 0)
  spread       the contended workload over --locks lock sets at once, the
               clients spread evenly over them (hand-offs of different locks
               may share the log's appends); reports grants/s in total
  sets         --sets lock sets, each with one W lock held by one of a few
               owners (one per client), created at the largest --clients;
               reports the setup rate and the server's resident memory
               from --admin, per set

Each uncontended, contended and spread measurement runs the empty workload (a gRPC
health check) at the same concurrency first, and reports the calls/s it
reached as a fraction of the empty call's. With --admin the server's CPU
is read from its /metrics too. The bench exits non-zero when a fence was
violated, a lock was left held, or the fences issued do not match the
grants counted.`

func (g *globals) benchLockCmd() *cobra.Command {
	b := &bench.Lock{}
	var ops, clients string
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Measure the lock service: lock+unlock cycles, contended hand-offs, memory per lock set",
		Long:  benchLockHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.Levels, err = bench.ParseClients(clients); err != nil {
				return usageError{err}
			}
			b.Ops = bench.SplitList(ops)
			return g.runBench(cmd, b)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", strings.Join(bench.LockWorkloads, ","), "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.Duration, "for", 5*time.Second, "time per measurement")
	alias(f, "duration", "for")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&b.Sets, "sets", 1_000_000, "lock sets for the sets workload")
	f.IntVar(&b.Locks, "locks", 16, "lock sets the spread workload's clients share")
	f.StringVar(&b.Admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory and CPU (empty: not read; the sets workload needs it)")
	return cmd
}

const benchLookupHelp = `Measure the lookup service of a djinn server running in its own process.

Workloads (--ops):
  register   each client loops register(item) + cancel of its lease;
             reports cycles/s (2 calls each) and p50/p99 per cycle. Items
             have 2 service types and 5 attribute entries
  lookup     --items items registered first (2 types, 5 entries each; one
             entry names the item alone), then each client loops lookup
             (max 1) by that one entry field, for a random item, with the
             client library's Registrar.LookupN (a unary call); reports
             lookups/s, p50/p99, answers that were not the item asked for
             (must be 0), and the server's resident memory from --admin
             with the items loaded
  lookup-stream
             the lookup workload's lookups over LookupStream (the client
             library's Registrar.Stream), one stream per client: the same
             answers without a call each (the items are loaded once for
             all the lookup workloads)
  lookup-shared
             the same over --streams streams shared by all the clients:
             lookups that wait at the same time go as one batch. Two
             streams suit two cores: more make smaller batches and more
             messages for the same lookups
  notify     --watchers notify registrations on one service type, each its
             own listener (hosted by the bench at --listen), then --rounds
             registers of a new matching item; reports the time from the
             register call's start until the last watcher had its event,
             p50/p99, and events/s
  discovery  --rounds times: a locator discovery client retrying (every
             --retry-min, doubling to --retry-max) at a loopback locator,
             then, at a random point of its longest wait, a unicast-only
             registrar started there; reports the time
             from the registrar's start to the client's Discovered event,
             p50/p99. Runs in this process; needs no server

Each register and lookup measurement runs the empty workload (a gRPC
health check) at the same concurrency first, and reports the calls/s it
reached as a fraction of the empty call's. With --admin the server's CPU
is read from its /metrics too. The bench exits non-zero when a lookup
found the wrong item, a register cycle left an item behind, or a watcher
missed its event.`

func (g *globals) benchLookupCmd() *cobra.Command {
	b := &bench.Lookup{}
	var ops, clients string
	cmd := &cobra.Command{
		Use:   "lookup",
		Short: "Measure the lookup service: register+cancel, lookups, notify fan-out, discovery time",
		Long:  benchLookupHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.Levels, err = bench.ParseClients(clients); err != nil {
				return usageError{err}
			}
			b.Ops = bench.SplitList(ops)
			return g.runBench(cmd, b)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", strings.Join(bench.LookupWorkloads, ","), "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.Duration, "for", 5*time.Second, "time per measurement")
	alias(f, "duration", "for")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&b.Streams, "streams", 2, "lookup-shared: lookup streams all the clients share, spread over the connections")
	f.IntVar(&b.Items, "items", 100_000, "items registered for the lookup workload")
	f.IntVar(&b.Watchers, "watchers", 1_000, "notify registrations for the notify workload")
	f.IntVar(&b.Rounds, "rounds", 20, "rounds of the notify and discovery workloads")
	f.DurationVar(&b.RetryMin, "retry-min", time.Millisecond, "discovery: the client's first wait between attempts")
	f.DurationVar(&b.RetryMax, "retry-max", 10*time.Millisecond, "discovery: the client's longest wait between attempts")
	f.StringVar(&b.Listen, "listen", "127.0.0.1:0", "address of the bench's listeners for the notify workload (the server must reach it)")
	f.StringVar(&b.Admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory and CPU (empty: not read)")
	f.DurationVar(&b.MaxStaleness, "max-staleness", 0, "let any member answer the lookups from a state at most this old (with several --server addresses, lookups spread over the cluster)")
	return cmd
}

const benchLDSHelp = `Measure the lookup discovery service of a djinn server running in its own process.

--registrations registrations are made first (by --clients callers over
--conns connections), each with one of ten groups and the locators of all
--registrars lookup services, which are not running yet; every event goes
to one listener the bench hosts at --listen. The server's live heap
(read from --admin right after a collection) before and after gives the
memory per registration; its resident memory is shown beside it.

Then the bench starts the --registrars lookup services (the discovery
side of a registrar, unicast only, in this process, at the locators'
addresses) and measures the time from the first one's start until the
last registration has had a discovered event for every one of them: the
server's locator discovery finds them, and the events are batched per
registration. It reports the time to the first and the last event, the
per-registration completion p50/p99, the events and registrars per event.

Every event is checked: sequence numbers strictly increasing per
registration, no lookup service discovered twice for a registration, no
discarded events, the groups each lookup service announced. The bench
exits non-zero on any violation or when a registration is still missing
a lookup service after --wait. It cancels its registrations at the end.`

func (g *globals) benchLDSCmd() *cobra.Command {
	b := &bench.LDS{}
	cmd := &cobra.Command{
		Use:   "lds",
		Short: "Measure the lookup discovery service: registrations over registrars, discovery to delivery",
		Long:  benchLDSHelp,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return g.runBench(cmd, b) },
	}
	f := cmd.Flags()
	f.IntVar(&b.Registrations, "registrations", 10_000, "registrations to make")
	f.IntVar(&b.Registrars, "registrars", 50, "lookup services to start")
	f.IntVar(&b.Clients, "clients", 64, "concurrent callers making the registrations")
	f.IntVar(&b.Conns, "conns", 4, "gRPC connections the callers share")
	f.DurationVar(&b.Timeout, "wait", 5*time.Minute, "longest wait for the last discovered event")
	alias(f, "timeout", "wait")
	f.StringVar(&b.Listen, "listen", "127.0.0.1:0", "address of the bench's listener (the server must reach it)")
	f.StringVar(&b.Admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory (empty: not read)")
	return cmd
}

// plainProcess runs the plain gRPC server of a bench's ceiling as this
// program's hidden "bench plain-server", in a process of its own; nil (in
// the bench's process) when this program is a test binary.
func plainProcess() bench.Plain {
	exe, err := os.Executable()
	if err != nil || strings.HasSuffix(exe, ".test") {
		return nil
	}
	return bench.PlainProcess(exe, "bench", "plain-server")
}

// benchPlainServerCmd serves the plain gRPC server a bench measures its
// ceiling on: the health service on a loopback port the system picks,
// until the process is stopped.
func benchPlainServerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "plain-server",
		Short:  "Serve a plain gRPC server (health only) for a bench's ceiling",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), bench.PlainReady+lis.Addr().String())
			return bench.ServePlain(cmd.Context(), lis)
		},
	}
}
