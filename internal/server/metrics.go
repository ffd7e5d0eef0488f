package server

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/status"
)

// metrics holds the server's Prometheus registry.
type metrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "djinn_rpc_total", Help: "gRPC calls served, by method and status code.",
	}, []string{"method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "djinn_rpc_seconds", Help: "gRPC call latency, by method.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	}, []string{"method"})
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	l := s.lessor
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.latency,
		gauge("djinn_leases", "Live leases.", func() float64 { return float64(s.machine.Leases.Len()) }),
		gauge("djinn_is_leader", "1 on the leader.", func() float64 {
			if s.node.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("djinn_raft_applied_index", "Last applied log index.", func() float64 { return float64(s.node.AppliedIndex()) }),
		gauge("djinn_mailbox_registrations", "Mailbox registrations.", func() float64 { r, _ := s.states.mailbox.Len(); return float64(r) }),
		gauge("djinn_mailbox_stored_events", "Events stored in mailboxes.", func() float64 { _, e := s.states.mailbox.Len(); return float64(e) }),
		counter("djinn_lease_renewals_total", "Lease renewals granted by this node as leader.", func() float64 { return float64(l.Renewals.Load()) }),
		counter("djinn_lease_expired_total", "Leases expired by this node as leader.", func() float64 { return float64(l.Expired.Load()) }),
		counter("djinn_lease_cancelled_total", "Leases cancelled through this node.", func() float64 { return float64(l.Cancelled.Load()) }),
		counter("djinn_lease_horizon_syncs_total", "Renewals that waited for a horizon write.", func() float64 { return float64(l.HorizonSyncs.Load()) }),
		counter("djinn_lease_checkpoints_total", "Lease horizons raised ahead of need.", func() float64 { return float64(l.Checkpoints.Load()) }),
		counter("djinn_mailbox_refused_full_total", "Events refused because their registration held its maximum of stored events.", func() float64 { return float64(s.mailbox.RefusedFull.Load()) }),
		gauge("djinn_renewal_sets", "Lease renewal sets.", func() float64 { n, _ := s.states.renewal.Len(); return float64(n) }),
		gauge("djinn_renewal_leases", "Client leases in renewal sets.", func() float64 { _, n := s.states.renewal.Len(); return float64(n) }),
		counter("djinn_renewal_calls_total", "Renewal calls made to landlords by this node as leader.", func() float64 { return float64(s.renewal.Calls.Load()) }),
		counter("djinn_renewal_renewed_total", "Client leases renewed and recorded by this node as leader.", func() float64 { return float64(s.renewal.Renewed.Load()) }),
		counter("djinn_renewal_retried_total", "Client lease renewals that failed indefinitely and will be retried.", func() float64 { return float64(s.renewal.Retried.Load()) }),
		counter("djinn_renewal_failed_total", "Client leases removed with a renewal failure event.", func() float64 { return float64(s.renewal.Failed.Load()) }),
		counter("djinn_renewal_unrecorded_total", "Renewal outcomes the log did not take (renewed again).", func() float64 { return float64(s.renewal.Unrecorded.Load()) }),
		counter("djinn_renewal_events_overflowed_total", "Renewal events not kept because their registration held its maximum undelivered.", func() float64 { return float64(s.states.renewal.Overflowed()) }),
		gauge("djinn_txn_transactions", "Transactions the manager remembers.", func() float64 { n, _ := s.states.txn.Len(); return float64(n) }),
		gauge("djinn_txn_active", "Transactions not yet decided.", func() float64 { _, n := s.states.txn.Len(); return float64(n) }),
		counter("djinn_txn_created_total", "Transactions created through this node as leader.", func() float64 { return float64(s.txn.Created.Load()) }),
		counter("djinn_txn_commits_total", "Commits that returned COMMITTED on this node as leader.", func() float64 { return float64(s.txn.Commits.Load()) }),
		counter("djinn_txn_aborts_total", "Aborts requested through this node as leader.", func() float64 { return float64(s.txn.Aborts.Load()) }),
		counter("djinn_txn_mixed_outcomes_total", "Participants that answered an abort with CannotAbort (they committed).", func() float64 { return float64(s.txn.MixedOutcomes.Load()) }),
		gauge("djinn_txn_unreachable_participants", "Participants failing to take an outcome for longer than the abandon time (still retried).", func() float64 { return float64(s.txn.Unreachable.Load()) }),
		gauge("djinn_delivery_queued_events", "Events queued for delivery on this leader.", func() float64 { return float64(s.mailbox.DeliveryStats().Queued) }),
		gauge("djinn_delivery_queues", "Registrations with events queued for delivery.", func() float64 { return float64(s.mailbox.DeliveryStats().Queues) }),
		gauge("djinn_delivery_delivered_events", "Events delivered in this leader term.", func() float64 { return float64(s.mailbox.DeliveryStats().Delivered) }),
		gauge("djinn_delivery_failed_events", "Events dropped by a definite failure or UnknownEvent in this leader term.", func() float64 { return float64(s.mailbox.DeliveryStats().Failed) }),
		gauge("djinn_delivery_retried_rounds", "Delivery attempts that failed indefinitely and were retried, in this leader term.", func() float64 { return float64(s.mailbox.DeliveryStats().Retried) }),
		gauge("djinn_delivery_overflowed_events", "Events refused by a full delivery queue, in this leader term.", func() float64 { return float64(s.mailbox.DeliveryStats().Overflowed) }),
	)
	return m
}

func (m *metrics) observe(method string, err error, d time.Duration) {
	if m == nil {
		return
	}
	method = method[strings.LastIndexByte(method, '/')+1:]
	m.calls.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
