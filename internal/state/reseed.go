package state

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Reseed copies a snapshot stream (Snapshot's records) from r to w for a
// cluster restored from it, a new cluster with the same resources:
//
//   - it gets the service id newID; the snapshot's service id, and those it
//     was restored from, become its previous ids, so references made by
//     the saved cluster still name its resources;
//   - member records are dropped: the new members record themselves;
//   - every lease the saved cluster granted keeps, from the restore on, the
//     time it had left at the save: its expiration and horizon move on by
//     delta, the time between the save and the restore (so no lease
//     expires before its granted expiration, however long the snapshot
//     waited). The renewal service's record of those leases moves with
//     them; leases of other landlords, whose clocks went on, do not.
//
// Every other record is copied as it is.
func Reseed(r io.Reader, w io.Writer, newID djinn.ID, delta time.Duration) error {
	if newID.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "reseed: zero service id")
	}
	br := bufio.NewReaderSize(r, 1<<16)
	bw := bufio.NewWriterSize(w, 1<<16)
	opts := protodelim.UnmarshalOptions{MaxSize: maxRecord}
	rs := &reseeder{newID: newID, delta: max(delta, 0)}
	for n := 0; ; n++ {
		var rec statepb.Record
		if err := opts.UnmarshalFrom(br, &rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
		keep, err := rs.record(&rec)
		if err != nil {
			return fmt.Errorf("snapshot record %d: %w", n, err)
		}
		if keep {
			if _, err := protodelim.MarshalTo(bw, &rec); err != nil {
				return fmt.Errorf("write reseeded snapshot: %w", err)
			}
		}
	}
	if rs.own == nil {
		return djinn.Errorf(djinn.InvalidArgument, "snapshot of a cluster that was never initialised: nothing to restore")
	}
	return bw.Flush()
}

type reseeder struct {
	newID djinn.ID
	delta time.Duration
	own   [][]byte // the saved cluster's service ids: its own and its previous ones
}

// record rewrites rec in place and says whether to keep it.
func (rs *reseeder) record(rec *statepb.Record) (bool, error) {
	switch r := rec.Record.(type) {
	case *statepb.Record_Init:
		if rs.own != nil {
			return false, djinn.Errorf(djinn.InvalidArgument, "a second cluster identity")
		}
		rs.own = append([][]byte{r.Init.GetServiceId()}, r.Init.GetPreviousIds()...)
		r.Init = &statepb.Init{ServiceId: rs.newID[:], PreviousIds: rs.own, RulesVersion: r.Init.GetRulesVersion()}
	case *statepb.Record_Member:
		return false, nil
	case *statepb.Record_Lease:
		r.Lease.ExpiresUnixNanos = rs.shift(r.Lease.GetExpiresUnixNanos())
		r.Lease.HorizonUnixNanos = rs.shift(r.Lease.GetHorizonUnixNanos())
	case *statepb.Record_RenewalSet:
		rs.renewalSet(r.RenewalSet)
	}
	return true, nil
}

// renewalSet moves on the times of the set's own lease's warning and of
// the leases in it that the saved cluster granted.
func (rs *reseeder) renewalSet(set *statepb.RenewalSetRecord) {
	set.WarnedExpiresUnixNanos = rs.shift(set.GetWarnedExpiresUnixNanos())
	for _, l := range set.GetLeases() {
		if !rs.granted(l.GetLandlord().GetServiceId()) {
			continue
		}
		l.ExpiresUnixNanos = rs.shift(l.GetExpiresUnixNanos())
		l.RenewedUnixNanos = rs.shift(l.GetRenewedUnixNanos())
	}
}

// granted reports whether service is the saved cluster's.
func (rs *reseeder) granted(service []byte) bool {
	return slices.ContainsFunc(rs.own, func(id []byte) bool { return string(id) == string(service) })
}

// shift moves an instant on by delta; zero (none) and the end of time stay.
func (rs *reseeder) shift(n int64) int64 {
	if n <= 0 || n == math.MaxInt64 {
		return n
	}
	if n > math.MaxInt64-int64(rs.delta)-1 {
		return math.MaxInt64 - 1
	}
	return n + int64(rs.delta)
}
