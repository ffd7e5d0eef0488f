package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The console in a real browser: headless Chromium, driven over the
// DevTools protocol. Without a Chromium the test is skipped — unless
// DJINN_REQUIRE_BROWSER is set (CI sets it), when that is a failure.
// DJINN_CONSOLE_SCREENSHOTS names a directory for a screenshot of each
// page (the README's come from there).

// browser starts a headless Chromium for the test and returns its tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("DJINN_CHROMIUM")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		if os.Getenv("DJINN_REQUIRE_BROWSER") != "" {
			t.Fatal("no chromium to test the console in, and DJINN_REQUIRE_BROWSER is set: install it (apt-get install chromium)")
		}
		t.Skip("no chromium: the console's browser test needs one (apt-get install chromium)")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	tab, cancelTab := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(func() { cancel(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// fp is the console's fingerprint of a capability.
func fp(id [16]byte) string {
	sum := sha256.Sum256(id[:])
	return hex.EncodeToString(sum[:8])
}

// waitFor waits until the JavaScript expression holds in the page.
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr)); err != nil {
		t.Fatalf("waiting until %s (%s): %v", what, expr, err)
	}
}

// click clicks the element sel names once it is on the page and shown,
// finding and clicking it in one step of the page's script: the console
// redraws its views as the state changes (and when the secret is given),
// so a node found in one step may be gone by the next.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](fmt.Sprintf("(() => { const e = document.querySelector(%q); if (!e || e.getClientRects().length === 0) return false; e.click(); return true })()", sel))
}

// shows returns the expression "the page shows text".
func shows(text string) string {
	return fmt.Sprintf("document.getElementById('page').innerText.includes(%q)", text)
}

// openPage opens the console's page and waits until it shows its view.
func openPage(t *testing.T, ctx context.Context, srv *server.Server, page string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.AdminURL()+"/#/"+page)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, page+" loaded", fmt.Sprintf("document.querySelector('#menu a.current')?.dataset.page === %q && document.getElementById('page').dataset.loaded", page))
	waitFor(t, ctx, "live updates on", "document.getElementById('live').className === 'on'")
}

func screenshot(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	dir := os.Getenv("DJINN_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", page, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+page+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleInABrowser(t *testing.T) {
	ctx := browser(t)
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	p := servertest.Populate(t, c, srv.Addr(), 10*time.Minute)

	t.Run("every page lists what was made", func(t *testing.T) {
		for _, tt := range []struct{ page, text string }{
			{"cluster", srv.NodeID()},
			{"leases", "lookup discovery registration"},
			{"mailbox", fp(p.Mailbox.ID)},
			{"renewal", fp(p.Renewal.ID())},
			{"txn", strconv.FormatUint(p.Txn.ID(), 10)},
			{"lock", fp(p.LockSet.ID())},
			{"lookup", p.Item.ID.String()},
			{"lds", c.ServiceID().String()}, // its own lookup service, discovered
		} {
			openPage(t, ctx, srv, tt.page)
			waitFor(t, ctx, tt.page+" shows "+tt.text, shows(tt.text))
			screenshot(t, ctx, tt.page)
		}
	})

	t.Run("the cluster page shows the rules version", func(t *testing.T) {
		st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, srv.Addr())))
		if err != nil {
			t.Fatal(err)
		}
		openPage(t, ctx, srv, "cluster")
		card := func(label string, v uint32) string {
			return fmt.Sprintf("[...document.querySelectorAll('#page .card')].some(c => c.lastChild.textContent === %q && c.querySelector('b').textContent === %q)", label, strconv.FormatUint(uint64(v), 10))
		}
		waitFor(t, ctx, "the rules version card", card("rules version", st.GetRulesVersion()))
		waitFor(t, ctx, "this member's supported maximum", card("this member supports rules up to", st.GetRulesMax()))
		waitFor(t, ctx, "no stop shown", "document.querySelector('#page .stopped') === null")
	})

	t.Run("a countdown moves", func(t *testing.T) {
		openPage(t, ctx, srv, "leases")
		// A live update may redraw the table: the countdown is read once
		// it is there, and a redraw in between reads as no move.
		first, err := chromedp.Run(ctx, chromedp.Poll[string]("document.querySelector('.countdown')?.textContent"))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the first countdown moves on from "+first, fmt.Sprintf("(document.querySelector('.countdown')?.textContent ?? %q) !== %[1]q", first))
	})

	t.Run("a lock's waiter appears and leaves", func(t *testing.T) {
		openPage(t, ctx, srv, "lock")
		waitFor(t, ctx, "nobody waits", "document.querySelectorAll('tr.waiter').length === 0")
		locks, err := c.LockService(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		other, err := locks.CreateOwner(t.Context(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		granted := make(chan error, 1)
		go func() {
			_, err := p.LockSet.Lock(t.Context(), client.HeldByOwner(other), client.LockW)
			granted <- err
		}()
		waitFor(t, ctx, "the waiter appears", "document.querySelectorAll('tr.waiter').length === 1")
		waitFor(t, ctx, "it waits for write", shows("owner "+fp(other.Cookie())))
		screenshot(t, ctx, "lock-waiting")
		if err := p.LockSet.Unlock(t.Context(), client.HeldByOwner(p.LockOwner), client.LockW); err != nil {
			t.Fatal(err)
		}
		if err := <-granted; err != nil {
			t.Fatalf("the waiter's lock: %v", err)
		}
		waitFor(t, ctx, "the waiter leaves", "document.querySelectorAll('tr.waiter').length === 0")
	})

	t.Run("the page follows the state", func(t *testing.T) {
		openPage(t, ctx, srv, "lookup")
		reg, err := c.Lookup(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r, err := reg.Register(t.Context(), client.ServiceItem{Service: []byte("scanner.example:1"), Types: []string{"Scanner"},
			Entries: []service.Entry{{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("flatbed")}}}}}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the new item appears", shows(r.ID.String()))
		waitFor(t, ctx, "its attribute shows", shows(`name="flatbed"`))
	})

	t.Run("an action needs the operator role", func(t *testing.T) {
		openPage(t, ctx, srv, "txn")
		abort := fmt.Sprintf(`button.act[data-action="abort"][data-target="%d"]`, p.Txn.ID())
		if err := chromedp.Do(ctx, click(abort), click("#confirm-yes")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the abort is refused", "document.getElementById('notice').textContent.includes('refused (403)')")
		screenshot(t, ctx, "refused")
		secret := servertest.Secret(t, srv)
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS("#secret"), secret),
			chromedp.Evaluate[chromedp.Void]("document.getElementById('secret').dispatchEvent(new Event('change'))"),
			click(abort), click("#confirm-no")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "a declined confirmation does nothing", shows("ACTIVE"))
		if err := chromedp.Do(ctx, click(abort), click("#confirm-yes")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the operator's abort is done", "document.getElementById('notice').textContent.endsWith('done.')")
		waitFor(t, ctx, "the transaction shows aborted", shows("ABORTED"))
	})
}
