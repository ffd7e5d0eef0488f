package main

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzArgumentParsers feeds one argument (UTF-8: other bytes are refused
// before any parser, TestExitCodes) to each parser of flag values and
// arguments: none panics, what one refuses is a usage error (exit 2),
// and its message is UTF-8 text, whatever part of the argument it quotes.
func FuzzArgumentParsers(f *testing.F) {
	for _, s := range []string{"", "5s", "forever", "any", "-1s", "r", "iw", "12", "12.0123456789abcdef0123456789abcdef",
		"djinn://127.0.0.1:4161/0/0", "Laser=Printer,Device", "Name.model=\"laser\"", "Name.n=3", "Name",
		strings.Repeat("é", 30), "1." + strings.Repeat("€", 20), "committed"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		check := func(parser string, err error, usage bool) {
			t.Helper()
			if err == nil {
				return
			}
			var u usageError
			if usage && !errors.As(err, &u) {
				t.Fatalf("%s(%q): %v is no usage error", parser, s, err)
			}
			if !utf8.ValidString(err.Error()) {
				t.Fatalf("%s(%q): message %q is not UTF-8", parser, s, err.Error())
			}
		}
		_, err := parseLease(s)
		check("parseLease", err, true)
		_, err = parseWait(s)
		check("parseWait", err, true)
		_, err = parseFor(s)
		check("parseFor", err, true)
		_, err = parseRef("listener", s)
		check("parseRef", err, true)
		_, err = parseSetArg(s)
		check("parseSetArg", err, true)
		_, err = parseModeFlag("mode", s)
		check("parseModeFlag", err, true)
		_, err = parseTxnState(s)
		check("parseTxnState", err, true)
		_, err = parseTxnID(s)
		check("parseTxnID", err, true)
		_, _, err = parseTxnToken(s)
		check("parseTxnToken", err, true)
		_, err = parseSupertypes(strings.Split(s, "\n")) // its caller makes it a usage error
		check("parseSupertypes", err, false)
		_, err = parseLookupEntries(strings.Split(s, "\n"))
		check("parseLookupEntries", err, true)
	})
}

// TestAbbreviatedArgumentKeepsItsCharacters: an argument an error
// abbreviates is cut between characters, never within one (whose bytes
// the message then quoted as \x escapes).
func TestAbbreviatedArgumentKeepsItsCharacters(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"1." + strings.Repeat("€", 20), strings.Repeat("é", 30), "x" + strings.Repeat("😀", 15)} {
		_, err := parseTxnID(arg)
		if err == nil {
			t.Fatalf("parseTxnID(%q) took it", arg)
		}
		if msg := err.Error(); strings.Contains(msg, `\x`) || !strings.Contains(msg, "…") {
			t.Errorf("parseTxnID(%q): %s; want the argument cut between characters", arg, msg)
		}
	}
}
