package participant

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/djinn-go/djinn/internal/disk"
)

// ErrDamaged matches the error OpenFileStore returns for a log it finds
// damaged (errors.Is); the error is a *disk.DamageError naming the file
// and offset.
var ErrDamaged = disk.ErrDamaged

// RepairReport says what RepairFileStore found and did.
type RepairReport struct {
	// Path is the store's log.
	Path string `json:"path"`
	// Saved is a copy of the log as it was found; empty when nothing was
	// changed.
	Saved string `json:"saved,omitempty"`
	// Dropped lists the damaged spans of the log, whose changes are lost.
	Dropped []Span `json:"dropped,omitempty"`
	// Torn is the length of a torn last frame cut off: a write a crash
	// interrupted, never acknowledged. 0: none.
	Torn int64 `json:"torn,omitempty"`
	// CutAt is where the log was found cut short (its end, or inside a
	// frame): what was written after it is lost. 0: not cut.
	CutAt int64 `json:"cut_at,omitempty"`
	// Older says how the log is older than the store's last clean close or
	// opening (PositionName): the changes written after it are lost. Empty:
	// it is not, or there is no record.
	Older string `json:"older,omitempty"`
	// Position says why the record of how far the store had got was
	// dropped. Empty: it was read and checked out, or there was none.
	Position string `json:"position,omitempty"`
	// Records is how many records the repaired store holds.
	Records int `json:"records"`
	// CrashCount is the crash count written; the next opening takes a
	// higher one than any the damaged spans could hold.
	CrashCount int64 `json:"crash_count"`
}

// Span is a range of bytes of a file.
type Span struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

// String describes the report for an operator.
func (r RepairReport) String() string {
	if r.Saved == "" {
		return fmt.Sprintf("%s: no damage found, left as it was", r.Path)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: kept %d records; the damaged log is saved as %s\n", r.Path, r.Records, r.Saved)
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "  dropped %d damaged bytes at offset %d: the changes written there are lost\n", d.Length, d.Offset)
	}
	if r.CutAt > 0 {
		fmt.Fprintf(&b, "  the log was cut short at offset %d: whatever was written after it is lost\n", r.CutAt)
	}
	if r.Older != "" {
		fmt.Fprintf(&b, "  %s: the changes written after it are lost\n", r.Older)
	}
	if r.Position != "" {
		fmt.Fprintf(&b, "  dropped the record of how far the store had got: %s\n", r.Position)
	}
	if r.Torn > 0 {
		fmt.Fprintf(&b, "  cut a torn last frame of %d bytes (a write a crash interrupted, never acknowledged)\n", r.Torn)
	}
	fmt.Fprintf(&b, "  crash count set to %d", r.CrashCount)
	return b.String()
}

// RepairFileStore repairs the store in dir, which must not be open (an open
// one is refused with djinn.ErrUnavailable where the directory can be
// locked, as OpenFileStore refuses a second store): it
// keeps every frame that checks out, drops the damaged ones, and rewrites
// the log, after saving the damaged log beside it. The report says what
// was dropped. A store with no damage is left as it is. Records written in
// a dropped frame are lost, and so are deletions: a record a dropped frame
// deleted comes back. Use it only when no backup or peer holds the data.
func RepairFileStore(dir string) (RepairReport, error) {
	path := filepath.Join(dir, logName)
	rep := RepairReport{Path: path}
	if _, err := os.Stat(dir); err != nil {
		return rep, fmt.Errorf("participant store %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	if lock != nil {
		defer lock.Close()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return rep, fmt.Errorf("participant store %s: %w", dir, err)
	}
	pos, recorded, cerr := readPos(dir)
	var d *disk.DamageError
	switch {
	case errors.As(cerr, &d):
		rep.Position = d.Problem
	case cerr != nil:
		return rep, cerr
	}
	scan := scanLog(data)
	if len(data) > 0 && len(scan.frames) > 0 && scan.frames[0].off == 0 && !isHeader(scan.frames[0].payload) && !isHeaderV1(scan.frames[0].payload) {
		return rep, fmt.Errorf("participant store %s: %s is not a participant store: not repaired", dir, logName)
	}
	if len(scan.frames) == 0 {
		return rep, fmt.Errorf("participant store %s: %s holds no readable frame: nothing to keep, not repaired", dir, logName)
	}
	s := &FileStore{dir: dir, live: map[string][]byte{}}
	var count, dropped int64
	for _, f := range scan.frames {
		if isHeader(f.payload) || isHeaderV1(f.payload) {
			continue
		}
		c, err := s.replayFrame(f, count)
		if err != nil {
			return rep, fmt.Errorf("participant store %s: %w: not repaired", dir, err)
		}
		count = max(count, c)
	}
	if recorded {
		var d *disk.DamageError
		switch err := pos.check(dir, scan.end, scan.torn, count, s.seq); {
		case !errors.As(err, &d):
		case d.Path == path:
			rep.Older = d.Problem
		default:
			rep.Position = d.Problem
		}
	}
	if len(scan.damaged) == 0 && scan.short == nil && scan.torn == 0 && rep.Older == "" && rep.Position == "" {
		return rep, nil
	}
	for _, d := range scan.damaged {
		rep.Dropped = append(rep.Dropped, Span{Offset: int64(d.from), Length: int64(d.to - d.from)})
		dropped += int64(d.to - d.from)
	}
	rep.Torn = int64(scan.torn)
	rep.CutAt = int64(scan.cutAt())
	// Every count frame is 17 bytes: the damaged spans hold fewer counts
	// than that many. What was cut off is unknown: the count jumps by 2^32,
	// more than the opens a store sees. The recorded count was taken too.
	rep.CrashCount = count + dropped/int64(len(countFrame(0))) + 1
	if rep.CutAt > 0 {
		rep.CrashCount += 1 << 32
	}
	if recorded {
		rep.CrashCount = max(rep.CrashCount, pos.crash+1)
		s.seq = max(s.seq, pos.seq)
	}
	rep.Records = len(s.live)
	if rep.Saved, err = saveCopy(path, data); err != nil {
		return rep, fmt.Errorf("participant store %s: saving the damaged log: %w", dir, err)
	}
	if _, _, err := s.rewrite(rep.CrashCount); err != nil {
		return rep, err
	}
	// Only now: removed first, a crash would leave the old log unchecked.
	if err := removePos(dir); err != nil {
		return rep, fmt.Errorf("participant store %s: removing %s: %w", dir, PositionName, err)
	}
	return rep, nil
}

// saveCopy writes data, fsynced, to the first free name path.damaged,
// path.damaged.1, ... and returns it.
func saveCopy(path string, data []byte) (string, error) {
	for i := 0; ; i++ {
		name := path + ".damaged"
		if i > 0 {
			name += fmt.Sprintf(".%d", i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = disk.SyncDir(filepath.Dir(path))
		}
		return name, err
	}
}
