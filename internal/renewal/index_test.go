package renewal_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LE.2.2: leases are equal when their landlords and cookies are. Two
// landlords may use the same cookie; their leases are different client
// leases, in different sets or the same one, and each is renewed at its
// own landlord and removed on its own.
func TestSameCookieOtherLandlord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		a, b := f.landlord(time.Minute), f.landlord(time.Minute)
		la, c := a.grant(time.Minute)
		lb := b.GrantCookie(c, time.Now().Add(time.Minute), djinnpb.SerialFormat_SERIAL_FORMAT_DURATION)
		s1, s2 := f.create(time.Hour), f.create(time.Hour)
		f.mustRenewFor(s1, la, djinn.Forever, djinn.Forever)
		f.mustRenewFor(s2, lb, djinn.Forever, djinn.Forever)
		if err := f.renewFor(s1, lb, djinn.Forever, djinn.Forever); djinn.KindOf(err) != djinn.InvalidArgument {
			t.Fatalf("renewFor of b's lease, in another set: %v, want InvalidArgument", err)
		}
		if n1, n2 := len(f.leases(s1)), len(f.leases(s2)); n1 != 1 || n2 != 1 {
			t.Fatalf("sets hold %d and %d leases, want 1 and 1", n1, n2)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if !a.expiration(c).After(time.Now()) || !b.expiration(c).After(time.Now()) {
			t.Fatalf("a lease lapsed: at a %v, at b %v, now %v", a.expiration(c), b.expiration(c), time.Now())
		}
		got, err := f.svc.Remove(context.Background(), s2.Info.ID, lb)
		if err != nil || got == nil {
			t.Fatalf("remove b's lease: %v, %v", got, err)
		}
		if ls := f.leases(s1); len(ls) != 1 || djinn.ID(ls[0].GetLease().GetLandlord().GetServiceId()).String() != a.Ref().Service.String() {
			t.Fatalf("after removing b's lease, s1 holds %v; want a's lease", ls)
		}
	})
}
