package netlisten_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/netlisten"
)

// TestError: a malformed address, a port out of range or a host that does
// not exist is the caller's mistake (InvalidArgument); a port in use is
// the machine's condition (Unavailable); either names the address.
func TestError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, row := range []struct {
		addr string
		kind error
	}{
		{"nope", djinn.ErrInvalidArgument},
		{"127.0.0.1:99999", djinn.ErrInvalidArgument},
		{"127.0.0.1:notaport", djinn.ErrInvalidArgument},
		{"no-such-host.invalid:1", djinn.ErrInvalidArgument},
		{taken.Addr().String(), djinn.ErrUnavailable},
	} {
		ln, lerr := net.Listen("tcp", row.addr)
		if lerr == nil {
			ln.Close()
			t.Errorf("listening on %q succeeded", row.addr)
			continue
		}
		err := netlisten.Error("test listener", row.addr, lerr)
		if !errors.Is(err, row.kind) || !strings.HasPrefix(err.Error(), `test listener "`+row.addr+`": `) {
			t.Errorf("%q: %v (kind %s), want kind %s naming the address", row.addr, err, djinn.KindOf(err), row.kind)
		}
	}
}
