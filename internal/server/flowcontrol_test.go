package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestSessionCallsSendNoWindowPings: calls over a session make no HTTP/2
// PING of gRPC's flow control estimation on either side. With dynamic
// windows, each side answered data with a window update and a ping (and
// the other side with the ping's acknowledgement) whenever none was out:
// on a connection of small calls, about one of each per message. The
// server and the client library set their windows, so neither estimates
// (the only pings left are keepalives, whose payload is zero).
func TestSessionCallsSendNoWindowPings(t *testing.T) {
	srv := servertest.Start(t, servertest.Config(t))
	var (
		mu    sync.Mutex
		conns []*frameCounter
	)
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		fc := newFrameCounter(c)
		mu.Lock()
		conns = append(conns, fc)
		mu.Unlock()
		return fc, nil
	}
	c := servertest.Dial(t, srv.Addr(), client.WithDialOptions(grpc.WithContextDialer(dial)))
	ctx := context.Background()
	const calls = 50
	for range calls {
		if _, err := c.Mailbox().Register(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	data := 0
	for _, fc := range conns {
		fc.wait()
		for _, d := range []*direction{&fc.sent, &fc.received} {
			if d.err != nil {
				t.Fatalf("frames %s: %v", d.name, d.err)
			}
			if d.pings != 0 {
				t.Errorf("%d PING frames %s with a payload (window estimation), want none", d.pings, d.name)
			}
			data += d.data
		}
	}
	if data < 2*calls {
		t.Fatalf("%d DATA frames over every connection for %d calls: the counter saw too little to tell", data, calls)
	}
}

// frameCounter is a connection whose HTTP/2 frames are counted, each way.
type frameCounter struct {
	net.Conn
	sent, received direction
	in, out        *io.PipeWriter
	once           sync.Once
}

// direction counts the frames one way.
type direction struct {
	name  string
	done  chan struct{}
	data  int   // DATA frames
	pings int   // PING frames, not acknowledgements, with a non-zero payload
	err   error // the frames did not parse
}

func newFrameCounter(c net.Conn) *frameCounter {
	fc := &frameCounter{Conn: c,
		sent:     direction{name: "sent by the client", done: make(chan struct{})},
		received: direction{name: "sent by the server", done: make(chan struct{})}}
	var in, out *io.PipeReader
	in, fc.in = io.Pipe()
	out, fc.out = io.Pipe()
	go fc.sent.count(out, true)
	go fc.received.count(in, false)
	return fc
}

func (fc *frameCounter) Read(p []byte) (int, error) {
	n, err := fc.Conn.Read(p)
	_, _ = fc.in.Write(p[:n])
	return n, err
}

func (fc *frameCounter) Write(p []byte) (int, error) {
	_, _ = fc.out.Write(p)
	return fc.Conn.Write(p)
}

func (fc *frameCounter) Close() error {
	fc.once.Do(func() {
		fc.in.Close()
		fc.out.Close()
	})
	return fc.Conn.Close()
}

// wait waits until both directions are counted to the connection's close.
func (fc *frameCounter) wait() {
	<-fc.sent.done
	<-fc.received.done
}

// count reads frames from r until it ends; a client's side starts with the
// connection preface.
func (d *direction) count(r *io.PipeReader, preface bool) {
	defer close(d.done)
	defer func() { _, _ = io.Copy(io.Discard, r) }() // never block the connection
	if preface {
		if _, err := io.ReadFull(r, make([]byte, len(http2.ClientPreface))); err != nil {
			d.err = err
			return
		}
	}
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				d.err = err
			}
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			d.data++
		case *http2.PingFrame:
			if !f.IsAck() && f.Data != [8]byte{} {
				d.pings++
			}
		}
	}
}
