package disk

// SectorSize is the unit a disk writes whole: a write a crash interrupts
// leaves each sector either written or as it was.
const SectorSize = 512

// Torn reports whether rec, the bytes of a record that starts at offset
// off of its file and fails its checksum, shows the mark of a write a crash
// interrupted: a sector's worth of it (the part of rec inside one sector)
// that reads as zeros, as space never written does. A record whose every
// sector holds data was written whole, so its failing checksum is damage.
//
// Zeros inside a record's data look the same, so a record holding a whole
// sector of zeros that is then damaged elsewhere is taken for torn; the
// stores put a frame header or a length at the start of every record, and
// a sector's part of a record is all zeros only if that sector was never
// written or the record's own data is zeros there.
func Torn(rec []byte, off int64) bool {
	for len(rec) > 0 {
		n := SectorSize - int(off%SectorSize)
		n = min(n, len(rec))
		if allZero(rec[:n]) {
			return true
		}
		rec, off = rec[n:], off+int64(n)
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
