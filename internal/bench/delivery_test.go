package bench

import "testing"

// A delivery workload says what each event cost on the wire, from the
// server's counters before and after the run; without them it says
// nothing rather than a guess.
func TestDeliveryFigures(t *testing.T) {
	before := map[string]float64{
		"djinn_mailbox_streamed_events_total": 10, deliveriesSent: 20, deliveriesReceived: 10,
		"djinn_mailbox_delivered_events_total": 5, "djinn_mailbox_delivery_sends_total": 5,
	}
	after := map[string]float64{
		"djinn_mailbox_streamed_events_total": 110, deliveriesSent: 130, deliveriesReceived: 60,
		"djinn_mailbox_delivered_events_total": 405, "djinn_mailbox_delivery_sends_total": 105,
	}
	got := map[string]float64{}
	for _, f := range append(deliveryFigures("deliverstream", before, after), deliveryFigures("deliver", before, after)...) {
		got[f.Name] = f.Value
	}
	want := map[string]float64{
		"stream messages sent per event":    1.1,
		"stream acknowledgements per event": 0.5,
		"events per delivery call":          4,
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g < v-1e-9 || g > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	if f := deliveryFigures("deliverstream", nil, after); f != nil {
		t.Errorf("without a reading before: %v, want no figures", f)
	}
	if f := deliveryFigures("deliver", before, before); f != nil {
		t.Errorf("with no delivery calls: %v, want no figures", f)
	}
}
