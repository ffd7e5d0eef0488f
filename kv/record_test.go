package kv

import (
	"fmt"
	"testing"
)

func FuzzDecodeChanges(f *testing.F) {
	f.Add(encodeChanges(map[string]change{nsKey("", "a"): {value: []byte("1")}, nsKey("", "b"): {deleted: true}, nsKey("cn:x", "c"): {value: []byte{}}, nsKey("cn:x", "d"): {deleted: true}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := decodeChanges(b)
		if err != nil {
			return
		}
		again, err := decodeChanges(encodeChanges(cs))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(cs) {
			t.Fatalf("encoding what was decoded changed it: %v -> %v (%v)", cs, again, err)
		}
	})
}
