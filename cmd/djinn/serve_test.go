package main

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// TestServeJoinFlags: --join-groups, --join-locators and --join-multicast
// set the [lookup-join] section over the file's and the environment's.
func TestServeJoinFlags(t *testing.T) {
	final, flagged := server.Default(), server.Default()
	final.LookupJoin.Locators = []string{"jini://from-the-file:4160"}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	serveFlags(fs, &flagged)
	if err := fs.Parse([]string{"--join-groups", "lab,ops", "--join-locators", "jini://a:4160,jini://b", "--join-multicast"}); err != nil {
		t.Fatal(err)
	}
	applyFlags(fs, &final, &flagged)
	j := final.LookupJoin
	if !slices.Equal(j.Groups, []string{"lab", "ops"}) || !slices.Equal(j.Locators, []string{"jini://a:4160", "jini://b"}) || !j.Multicast || !j.Enabled {
		t.Errorf("[lookup-join] after the flags: %+v", j)
	}
	if err := final.Check(); err != nil {
		t.Errorf("the configuration the flags made: %v", err)
	}
}

// TestProfileContention: --profile-contention turns on the runtime's mutex
// and block profiles, which are otherwise off: a contended wait is then
// recorded.
func TestProfileContention(t *testing.T) {
	if runtime.SetMutexProfileFraction(-1) != 0 {
		t.Fatal("the mutex profile is on before --profile-contention")
	}
	profileContention(false)
	if runtime.SetMutexProfileFraction(-1) != 0 {
		t.Fatal("profile-contention off turned the mutex profile on")
	}
	profileContention(true)
	t.Cleanup(func() {
		runtime.SetBlockProfileRate(0)
		runtime.SetMutexProfileFraction(0)
	})
	if got := runtime.SetMutexProfileFraction(-1); got != 10 {
		t.Errorf("mutex profile fraction %d, want 10", got)
	}

	// A receive that waits a millisecond or more, far above the 10 µs rate,
	// is always recorded. The millisecond starts only once the receiver is
	// blocked (synctest.Wait), so a busy machine can make the wait longer,
	// never shorter or absent. It is counted in the receiver's own record:
	// the profile keeps one record per stack, across runs of this test.
	before := waitsRecorded(t)
	start, elapsed := make(chan struct{}), make(chan struct{})
	go func() { // outside the bubble: its millisecond is a real one
		<-start
		time.Sleep(time.Millisecond)
		close(elapsed)
	}()
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan struct{})
		go contendedReceive(ch)
		synctest.Wait()
		close(start)
		<-elapsed
		close(ch)
	})
	if after := waitsRecorded(t); after <= before {
		t.Errorf("block profile has %d waits of the receiver after a 1ms channel wait, %d before: want more", after, before)
	}
}

// contendedReceive waits for ch to close: the wait TestProfileContention
// looks for in the block profile.
func contendedReceive(ch <-chan struct{}) { <-ch }

// waitsRecorded returns how many waits the block profile holds in
// contendedReceive.
func waitsRecorded(t *testing.T) int64 {
	t.Helper()
	var rs []runtime.BlockProfileRecord
	for {
		n, ok := runtime.BlockProfile(rs)
		if ok {
			rs = rs[:n]
			break
		}
		rs = make([]runtime.BlockProfileRecord, n+16)
	}
	var count int64
	for _, r := range rs {
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.HasSuffix(f.Function, ".contendedReceive") {
				count += r.Count
				break
			}
			if !more {
				break
			}
		}
	}
	return count
}
