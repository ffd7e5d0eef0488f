// Package disk holds what djinn's stores share about damage on disk: the
// error a store returns when a file cannot be read back as it was written,
// the test that tells a torn write from damage, and the durable replacement
// of the small record files beside the stores (WriteFile, Remove, SyncDir).
//
// The rule every store follows: either everything it acknowledged is read
// back, or it refuses to open and says which file, which offset, and how to
// recover. A write that a crash interrupted was never acknowledged, so a
// torn write at the very end of a file is cut off; anything else that fails
// its checksum is damage. A torn write is recognised by what it leaves: a
// record cut short by the end of the file, or a disk sector of it that reads
// as never written (all zeros), because a disk writes whole sectors and the
// space past a file's end reads as zeros until written. A record that is
// whole and fails its checksum, or that has valid records after it, is
// damage: a crash cannot produce it.
package disk
