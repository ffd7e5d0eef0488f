package djinn_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
)

func TestErrorsMatchTheirKind(t *testing.T) {
	for _, k := range djinn.Kinds() {
		err := fmt.Errorf("wrapped: %w", djinn.Errorf(k, "thing %d: bad", 7))
		if !errors.Is(err, k) {
			t.Errorf("errors.Is(%v, %s) = false", err, k)
		}
		if got := djinn.KindOf(err); got != k {
			t.Errorf("KindOf(%v) = %s, want %s", err, got, k)
		}
		for _, other := range djinn.Kinds() {
			if other != k && errors.Is(err, other) {
				t.Errorf("error of kind %s matches %s", k, other)
			}
		}
	}
	if djinn.KindOf(nil) != "" {
		t.Error("KindOf(nil) is not empty")
	}
	if djinn.KindOf(errors.New("plain")) != djinn.Internal {
		t.Error("a plain error is not Internal")
	}
}

// TestContextErrorsAreUnavailable: as KindOf's documentation says, a
// context's end is Unavailable (the call may or may not have happened),
// however it was wrapped, and not a bug on the other side.
func TestContextErrorsAreUnavailable(t *testing.T) {
	for _, err := range []error{context.Canceled, context.DeadlineExceeded, fmt.Errorf("put k: %w", context.Canceled)} {
		if got := djinn.KindOf(err); got != djinn.Unavailable {
			t.Errorf("KindOf(%v) = %s, want %s", err, got, djinn.Unavailable)
		}
		if djinn.IsDefinite(err) {
			t.Errorf("IsDefinite(%v): a context's end is not definite", err)
		}
	}
	if got := djinn.KindOf(errors.Join(context.Canceled, djinn.Errorf(djinn.NoSuchObject, "x"))); got != djinn.NoSuchObject {
		t.Errorf("a kind in the chain goes first: got %s", got)
	}
}

// TestDefinite: LR.1 (definite exceptions) — bad object, bad invocation and
// lease exceptions are definite; communication failures are not.
func TestDefinite(t *testing.T) {
	definite := []djinn.Kind{djinn.UnknownLease, djinn.LeaseDenied, djinn.NoSuchObject, djinn.InvalidArgument, djinn.UnknownEvent, djinn.Unsupported}
	indefinite := []djinn.Kind{djinn.Unavailable, djinn.ResourceExhausted, djinn.Internal}
	for _, k := range definite {
		if !djinn.IsDefinite(djinn.Errorf(k, "x")) {
			t.Errorf("%s is not definite", k)
		}
	}
	for _, k := range indefinite {
		if djinn.IsDefinite(djinn.Errorf(k, "x")) {
			t.Errorf("%s is definite", k)
		}
	}
	if djinn.IsDefinite(nil) {
		t.Error("nil is definite")
	}
}

func TestCheckLeaseDuration(t *testing.T) {
	tests := []struct {
		d  time.Duration
		ok bool
	}{
		{time.Second, true}, {djinn.Forever, true}, {djinn.Any, true},
		{0, false}, {-2, false}, {-time.Hour, false},
	}
	for _, tt := range tests {
		err := djinn.CheckLeaseDuration("lease duration", tt.d)
		if (err == nil) != tt.ok {
			t.Errorf("CheckLeaseDuration(%v) = %v, want ok=%v", tt.d, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), djinn.FormatDuration(tt.d))) {
			t.Errorf("CheckLeaseDuration(%v) = %q: want invalid argument naming the value", tt.d, err)
		}
	}
}

func TestAddDurationSaturates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	if got := djinn.AddDuration(now, djinn.Forever); !got.Equal(djinn.EndOfTime) {
		t.Errorf("now+Forever = %v", got)
	}
	if got := djinn.AddDuration(now, djinn.Forever-1); !got.Equal(djinn.EndOfTime) {
		t.Errorf("now+(Forever-1) = %v, want the end of time", got)
	}
	if got := djinn.Remaining(djinn.EndOfTime, now); got != djinn.Forever {
		t.Errorf("Remaining(end) = %v", got)
	}
	if got := djinn.Remaining(now.Add(-time.Second), now); got != 0 {
		t.Errorf("Remaining(past) = %v", got)
	}
}

func TestRefRoundTrip(t *testing.T) {
	r := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.NewID(), Object: djinn.NewID()}
	got, err := djinn.ParseRef(r.String())
	if err != nil || got != r {
		t.Fatalf("ParseRef(%s) = %v, %v", r, got, err)
	}
	moved := got
	moved.Endpoint = "[::1]:9"
	if !moved.Equal(r) {
		t.Error("references with the same ids but other endpoints are not equal")
	}
	for _, bad := range []string{"", "djinn://", "http://a:1/x/y", "djinn://a:1/zz/" + r.Object.String(), "djinn://a/" + r.Service.String() + "/" + r.Object.String(), "djinn://a:1/" + r.Service.String()} {
		if _, err := djinn.ParseRef(bad); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("ParseRef(%q) = %v, want invalid argument", bad, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"forever": djinn.Forever, "any": djinn.Any, "90s": 90 * time.Second} {
		if got, err := djinn.ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := djinn.ParseDuration("soon"); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "soon") {
		t.Errorf("ParseDuration(soon) = %v", err)
	}
}

func FuzzParseRef(f *testing.F) {
	f.Add("djinn://127.0.0.1:4161/" + djinn.NewID().String() + "/" + djinn.NewID().String())
	f.Add("djinn://[::1]:1/0/0")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := djinn.ParseRef(s)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("ParseRef(%q) error %v is not invalid argument", s, err)
			}
			return
		}
		again, err := djinn.ParseRef(r.String())
		if err != nil || again != r {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}

func FuzzParseID(f *testing.F) {
	f.Add(djinn.NewID().String())
	f.Add("0000-0000")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := djinn.ParseID(s)
		if err != nil {
			return
		}
		if again, err := djinn.ParseID(id.String()); err != nil || again != id {
			t.Fatalf("round trip of %q failed", s)
		}
	})
}

// FuzzParseDuration: a lease duration as the CLI's flags and the
// configuration take it is refused InvalidArgument naming the text, or
// parses to one FormatDuration prints back as the same duration.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "forever", "ANY", "-1ns", "0", "2562047h47m16.854775807s", "-2562047h47m16.854775808s", "1.5h", "9223372036854775807ns", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := djinn.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParseDuration(%q) error %v: want invalid argument naming it", s, err)
			}
			return
		}
		text := djinn.FormatDuration(d)
		if again, err := djinn.ParseDuration(text); err != nil || again != d {
			t.Fatalf("ParseDuration(%q) = %d, printed %q, which parses to %d, %v", s, d, text, again, err)
		}
	})
}
