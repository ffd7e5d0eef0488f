package bench

import (
	"context"
	"strings"
)

// deliverySeries are the server's /metrics series a delivery workload
// reads before and after its run, to say what each event cost on the wire:
// the events sent over delivery streams and the streams' messages both
// ways, and the events pushed to targets and the calls that carried them.
var deliverySeries = map[string]bool{
	"djinn_mailbox_streamed_events_total":  true,
	"djinn_mailbox_delivered_events_total": true,
	"djinn_mailbox_delivery_sends_total":   true,
	deliveriesSent:                         true,
	deliveriesReceived:                     true,
}

const (
	deliveriesSent     = `grpc_server_msg_sent_total{grpc_method="Deliveries",grpc_service="djinn.v1.EventMailbox",grpc_type="bidi_stream"}`
	deliveriesReceived = `grpc_server_msg_received_total{grpc_method="Deliveries",grpc_service="djinn.v1.EventMailbox",grpc_type="bidi_stream"}`
)

// deliveryCounts reads deliverySeries; nil without an admin address or
// when the server does not answer (the figures are then left out).
func deliveryCounts(ctx context.Context, admin string) map[string]float64 {
	if admin == "" {
		return nil
	}
	m, err := adminMetrics(ctx, admin, func(n string) bool { return deliverySeries[n] })
	if err != nil {
		return nil
	}
	return m
}

// deliveryFigures are the per-event figures of a delivery workload between
// two readings: for streams, the server's messages and the client's
// acknowledgements per event sent; for push, events per call.
func deliveryFigures(op string, before, after map[string]float64) []Figure {
	if before == nil || after == nil {
		return nil
	}
	d := func(k string) float64 { return after[k] - before[k] }
	if strings.HasPrefix(op, "deliverstream") {
		events := d("djinn_mailbox_streamed_events_total")
		if events <= 0 {
			return nil
		}
		return []Figure{
			fig("stream messages sent per event", d(deliveriesSent)/events, ""),
			fig("stream acknowledgements per event", d(deliveriesReceived)/events, ""),
		}
	}
	sends := d("djinn_mailbox_delivery_sends_total")
	if sends <= 0 {
		return nil
	}
	return []Figure{fig("events per delivery call", d("djinn_mailbox_delivered_events_total")/sends, "")}
}
