package batch

import (
	"errors"
	"testing"

	"github.com/djinn-go/djinn"
)

func TestCookiesRoundTrip(t *testing.T) {
	ids := []djinn.ID{djinn.NewID(), djinn.NewID(), djinn.NewID()}
	got, err := Cookies(PackCookies(ids))
	if err != nil || len(got) != 3 || got[0] != ids[0] || got[2] != ids[2] {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := Cookies(make([]byte, 17)); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("17 bytes: %v, want invalid argument", err)
	}
	if _, err := Cookies(make([]byte, 16*(MaxLeases+1))); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("too many: %v, want invalid argument", err)
	}
}

func TestErrorsRoundTrip(t *testing.T) {
	in := []error{nil, djinn.Errorf(djinn.UnknownLease, "gone"), nil, djinn.Errorf(djinn.InvalidArgument, "bad")}
	out, err := ErrorsFrom(len(in), Errors(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if (in[i] == nil) != (out[i] == nil) || (in[i] != nil && djinn.KindOf(in[i]) != djinn.KindOf(out[i])) {
			t.Errorf("element %d: %v became %v", i, in[i], out[i])
		}
	}
	if _, err := ErrorsFrom(2, Errors(in)); err == nil {
		t.Error("an error index beyond the batch was accepted")
	}
}

func FuzzCookies(f *testing.F) {
	f.Add(PackCookies([]djinn.ID{djinn.NewID()}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := Cookies(b)
		if err != nil {
			return
		}
		if string(PackCookies(ids)) != string(b) {
			t.Fatal("cookies do not round-trip")
		}
	})
}
