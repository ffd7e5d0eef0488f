package discovery

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

// Defaults shared by the registrar and the discovery utilities.
const (
	// DefaultTimeout bounds one unicast discovery exchange: connecting,
	// the request and the answer.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxResponseSize bounds the unicast answer a discovering
	// entity reads: ample for an endpoint, a locator and hundreds of groups.
	DefaultMaxResponseSize = 64 << 10
)

// Unicast runs unicast discovery against a lookup service's locator: it
// connects, proposes djinn's format and returns what the registrar says of
// itself. ctx bounds the whole exchange. A Java lookup service answers with
// the null format, and the error then matches ErrNoFormat.
func Unicast(ctx context.Context, loc Locator) (RegistrarInfo, error) {
	return unicast(ctx, loc, 0, DefaultMaxResponseSize)
}

// unicast is Unicast with its own timeout (0: only ctx) and size limit.
func unicast(ctx context.Context, loc Locator, timeout time.Duration, maxSize int) (RegistrarInfo, error) {
	if loc.Host == "" || loc.Port < 1 || loc.Port > 65535 {
		return RegistrarInfo{}, djinn.Errorf(djinn.InvalidArgument,
			"unicast discovery of %v: want a locator with a host and a port from 1 to 65535 (ParseLocator, NewLocator)", loc)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", loc.Addr())
	if err != nil {
		return RegistrarInfo{}, djinn.Errorf(djinn.Unavailable, "unicast discovery of %v: %v", loc, err)
	}
	defer conn.Close()
	info, err := exchange(ctx, conn, maxSize)
	if err != nil {
		return RegistrarInfo{}, fmt.Errorf("unicast discovery of %v: %w", loc, err)
	}
	return info, nil
}

// exchange runs the discovering side of unicast discovery on conn, which
// the caller closes; ctx (its deadline, its cancellation) bounds it.
func exchange(ctx context.Context, conn net.Conn, maxSize int) (RegistrarInfo, error) {
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return RegistrarInfo{}, djinn.Errorf(djinn.Unavailable, "setting a deadline: %v", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, err := wire.RequestUnicast(conn, maxSize)
	if err != nil {
		return RegistrarInfo{}, err
	}
	return infoOf(resp), nil
}
