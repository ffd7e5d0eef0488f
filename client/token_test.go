package client

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func TestTokenRoundTrip(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	landlord := djinn.Ref{Endpoint: "[::1]:4160", Service: djinn.NewID(), Object: djinn.NewID()}
	for _, tt := range []struct {
		name   string
		exp    time.Time
		format SerialFormat
		later  time.Duration // parse this long after encoding
		want   time.Time
	}{
		{"LE.2.2 DURATION carries the time left", now.Add(time.Hour), SerialDuration, time.Minute, now.Add(time.Hour + time.Minute)},
		{"LE.2.2 ABSOLUTE carries the instant", now.Add(time.Hour), SerialAbsolute, time.Minute, now.Add(time.Hour)},
		{"forever", djinn.EndOfTime, SerialDuration, time.Minute, djinn.EndOfTime},
		{"expired", now.Add(-time.Hour), SerialDuration, 0, now},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLease(landlord, djinn.NewID(), tt.exp)
			if err := l.SetSerialFormat(tt.format); err != nil {
				t.Fatal(err)
			}
			tok := l.token(now)
			if !strings.HasPrefix(tok, TokenPrefix) || strings.ContainsAny(tok[len(TokenPrefix):], "+/=") {
				t.Fatalf("token %q: want prefix and unpadded base64url", tok)
			}
			got, err := parseToken(tok, now.Add(tt.later))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(l) || got.Landlord() != landlord || got.SerialFormat() != tt.format {
				t.Errorf("parsed %v, want %v", got, l)
			}
			if !got.Expiration().Equal(tt.want) {
				t.Errorf("expiration %v, want %v", got.Expiration(), tt.want)
			}
		})
	}
}

func encodeToken(pb *djinnpb.Lease) string {
	b, _ := proto.Marshal(pb)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func TestParseTokenErrors(t *testing.T) {
	good := encodeToken(wireLease(nil))
	tests := []struct {
		name, token, want string
	}{
		{"empty", "", `lease token "": want djinn-lease: prefix`},
		{"wrong prefix", "lease:abc", `lease token "lease:abc": want djinn-lease: prefix`},
		{"too long", TokenPrefix + strings.Repeat("A", MaxTokenLen), "lease token of 4108 bytes: longer than 4096"},
		{"padded", good + "=", "not unpadded base64url"},
		{"standard alphabet", TokenPrefix + "ab+/", "not unpadded base64url"},
		{"not a message", TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte{0xff, 0xff}), "not a lease"},
		{"empty message", TokenPrefix, "lease landlord: missing"},
		{"short cookie", encodeToken(wireLease(func(pb *djinnpb.Lease) { pb.Cookie = pb.Cookie[:8] })), "lease cookie: 8 bytes, want 16"},
		{"bad landlord endpoint", encodeToken(wireLease(func(pb *djinnpb.Lease) { pb.Landlord.Endpoint = "no-port" })), `endpoint "no-port": want host:port`},
		{"negative duration", encodeToken(wireLease(func(pb *djinnpb.Lease) { pb.DurationNanos = -1 })), "lease duration -1ns: negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseToken(tt.token)
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument containing %q", err, tt.want)
			}
		})
	}
	if _, err := ParseToken(good); err != nil {
		t.Errorf("good token: %v", err)
	}
}

func FuzzParseToken(f *testing.F) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	l := NewLease(djinn.Ref{Endpoint: "127.0.0.1:4160", Service: djinn.NewID(), Object: djinn.NewID()}, djinn.NewID(), now.Add(time.Hour))
	f.Add(l.token(now))
	_ = l.SetSerialFormat(SerialAbsolute)
	f.Add(l.token(now))
	f.Add(encodeToken(wireLease(func(pb *djinnpb.Lease) { pb.DurationNanos = 1<<63 - 1 })))
	f.Add(TokenPrefix)
	f.Add("djinn-lease:CgA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := parseToken(s, now)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("error of kind %v: %v", djinn.KindOf(err), err)
			}
			return
		}
		again, err := parseToken(l.token(now), now)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", l.token(now), err)
		}
		if !again.Equal(l) || again.Landlord() != l.Landlord() || again.SerialFormat() != l.SerialFormat() ||
			!again.Expiration().Equal(l.Expiration()) {
			t.Fatalf("round trip changed the lease: %v -> %v", l, again)
		}
	})
}
