package participant_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

// TestConfigNegativeRefused: a negative duration or bound in the Config is
// refused with InvalidArgument naming the field and the value (it was
// taken as the default); zero takes the default.
func TestConfigNegativeRefused(t *testing.T) {
	for _, row := range []struct {
		set  func(*participant.Config)
		want string
	}{
		{func(c *participant.Config) { c.Remember = -time.Second }, "participant config Remember -1s: negative; give a positive duration, or zero for the default (10m0s)"},
		{func(c *participant.Config) { c.Idle = -time.Minute }, "participant config Idle -1m0s: negative"},
		{func(c *participant.Config) { c.CallTimeout = -1 }, "participant config CallTimeout -1ns: negative"},
		{func(c *participant.Config) { c.MinRetry = -time.Millisecond }, "participant config MinRetry -1ms: negative"},
		{func(c *participant.Config) { c.MaxRetry = -time.Hour }, "participant config MaxRetry -1h0m0s: negative"},
		{func(c *participant.Config) { c.MaxTransactions = -5 }, "participant config MaxTransactions -5: negative; give a positive bound, or zero for the default (1000000)"},
	} {
		cfg := participant.Config{Endpoint: "127.0.0.1:7", Store: participant.NewMemStore(), Resource: newFakeRes(), Managers: participanttest.NewManager()}
		row.set(&cfg)
		p, err := participant.New(cfg)
		if err == nil {
			p.Close()
		}
		if !errors.Is(err, djinn.ErrInvalidArgument) || err == nil || !strings.Contains(err.Error(), row.want) {
			t.Errorf("New = %v, want InvalidArgument %q", err, row.want)
		}
	}
	p, err := participant.New(participant.Config{Endpoint: "127.0.0.1:7", Store: participant.NewMemStore(), Resource: newFakeRes(), Managers: participanttest.NewManager()})
	if err != nil {
		t.Fatalf("New with zero durations (the defaults): %v", err)
	}
	p.Close()
}
