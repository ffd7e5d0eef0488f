package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/djinn-go/djinn/internal/server"
)

// TestServeFlagsApplied: every flag of djinn serve but --config reaches the
// configuration the server runs with; a flag without a setter would be
// accepted and silently ignored.
func TestServeFlagsApplied(t *testing.T) {
	var final, flagged server.Config
	set := flagSetters(&final, &flagged)
	newServe().Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := set[f.Name]; !ok && f.Name != "config" {
			t.Errorf("djinn serve --%s has no setter: its value is ignored", f.Name)
		}
	})

}
