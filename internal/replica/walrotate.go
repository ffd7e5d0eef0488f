package replica

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// finishRotation finishes what a crash interrupted as the log moved on to
// a new segment. raft-wal seals a full segment on disk (its index and a
// commit frame, fsynced) as part of the append that fills it, and records
// the seal, with the next segment, in its metadata afterwards: a crash (or
// a stop) between the two leaves the metadata's open segment sealed on
// disk and nothing newer. Nothing is lost, but raft-wal, taking the
// segment for the one being written, would refuse every later append. So
// the start records the seal and a new, empty segment after it, as
// raft-wal would have, and logs it. s is that segment, checked as the
// open one.
func finishRotation(walDir string, s segCheck, segSize int, logger *slog.Logger) error {
	var db metadb.BoltMetaDB
	st, err := db.Load(walDir)
	if err != nil {
		return err
	}
	defer db.Close()
	last := len(st.Segments) - 1
	if last < 0 || st.Segments[last].ID != s.info.ID || !st.Segments[last].SealTime.IsZero() {
		return fmt.Errorf("the log's metadata does not list segment %s as the one being written", filepath.Base(s.path))
	}
	now := time.Now()
	sealed := sealInfo(st.Segments[last], s.walk)
	sealed.SealTime = now
	st.Segments[last] = sealed
	st.Segments = append(st.Segments, types.SegmentInfo{
		ID: st.NextSegmentID, BaseIndex: sealed.MaxIndex + 1, MinIndex: sealed.MaxIndex + 1,
		SizeLimit: uint32(segSize), Codec: wal.CodecBinaryV1, CreateTime: now,
	})
	st.NextSegmentID++
	if err := db.CommitState(st); err != nil {
		return err
	}
	logger.Warn("log: the last segment was sealed on disk but not yet in the log's metadata (a stop as the log moved on to a new segment); the seal is recorded and a new segment follows, nothing lost",
		"file", s.path, "last", sealed.MaxIndex)
	return nil
}
