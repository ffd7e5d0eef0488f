package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"time"

	"github.com/djinn-go/djinn"
)

//go:embed assets
var assets embed.FS

// Page is one page of the console.
type Page struct {
	Name  string `json:"name"`  // its path: /#/NAME, /api/view/NAME
	Title string `json:"title"` // what the menu says
}

// Source is what the console shows and does.
type Source struct {
	Pages []Page
	// View returns page's view, given the page's query (search terms);
	// it is encoded as JSON.
	View func(ctx context.Context, page string, q url.Values) (any, error)
	// Act takes action on page's object target; the caller is an
	// operator who confirmed.
	Act func(ctx context.Context, page, action, target string) error
	// Reader answers the context in which r reads the console (View
	// gets it: it may name who reads, and so what the views show), or an
	// error when r may not read it. Nil lets every request read in its
	// own context.
	Reader func(r *http.Request) (context.Context, error)
	// Operator answers nil when r comes from an operator.
	Operator func(r *http.Request) error
	// Version changes whenever the state may have changed.
	Version func() uint64
	// Done is closed when the server stops: live streams end.
	Done <-chan struct{}
}

// ConfirmHeader must be on every action: the page sets it once the
// operator confirmed.
const ConfirmHeader = "Djinn-Confirm"

// tick is how often the live stream speaks without a change.
const tick = 2 * time.Second

// Register adds the console's routes to mux: / and /console/ (the page
// and its assets), /api/pages, /api/view/{page}, /api/events and
// /api/action/{page}/{action}. Every answer forbids framing (unframed).
func Register(mux *http.ServeMux, src Source) {
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", unframed(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := src.read(w, r); ok {
			w.Header().Set("Cache-Control", "no-store")
			http.ServeFileFS(w, r, static, "index.html")
		}
	}))
	mux.Handle("GET /console/", unframed(http.StripPrefix("/console/", files).ServeHTTP))
	mux.Handle("GET /api/pages", unframed(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := src.read(w, r); ok {
			writeJSON(w, http.StatusOK, src.Pages)
		}
	}))
	mux.Handle("GET /api/view/{page}", unframed(src.view))
	mux.Handle("GET /api/events", unframed(src.events))
	mux.Handle("POST /api/action/{page}/{action}", unframed(src.act))
}

// unframed answers as h does, forbidding every page to show the answer in
// a frame: a page of another site framing the console could lead an
// operator (whose browser presents a client certificate to any page of
// the console's origin) to click an action and its confirmation, its
// buttons under the page's own.
func unframed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Content-Security-Policy", "frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		h(w, r)
	}
}

// read answers the context r reads the console in, and false (having
// answered 403) when r may not read it.
func (s Source) read(w http.ResponseWriter, r *http.Request) (context.Context, bool) {
	if s.Reader == nil {
		return r.Context(), true
	}
	ctx, err := s.Reader(r)
	if err != nil {
		writeError(w, http.StatusForbidden, err)
		return nil, false
	}
	return ctx, true
}

func (s Source) hasPage(name string) bool {
	for _, p := range s.Pages {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (s Source) view(w http.ResponseWriter, r *http.Request) {
	ctx, ok := s.read(w, r)
	if !ok {
		return
	}
	page := r.PathValue("page")
	if !s.hasPage(page) {
		writeError(w, http.StatusNotFound, fmt.Errorf("page %q: no such page", page))
		return
	}
	v, err := s.View(ctx, page, r.URL.Query())
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s Source) act(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(ConfirmHeader) != "yes" {
		writeError(w, http.StatusBadRequest, fmt.Errorf("action not confirmed: send it from the console, which asks first (header %s: yes)", ConfirmHeader))
		return
	}
	if err := s.Operator(r); err != nil {
		writeError(w, http.StatusForbidden, err)
		return
	}
	page, action := r.PathValue("page"), r.PathValue("action")
	if !s.hasPage(page) {
		writeError(w, http.StatusNotFound, fmt.Errorf("page %q: no such page", page))
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	target := r.PostForm.Get("target")
	if target == "" {
		writeError(w, http.StatusBadRequest, errors.New("target: missing (the object to act on)"))
		return
	}
	if err := s.Act(r.Context(), page, action, target); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"done": action + " " + target})
}

// events streams an event each time the version changes, and every tick.
func (s Source) events(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.read(w, r); !ok {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("streaming unsupported"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	last, quiet := ^uint64(0), time.Duration(0)
	for {
		if v := s.Version(); v != last || quiet >= tick {
			last, quiet = v, 0
			if _, err := fmt.Fprintf(w, "data: {\"version\":%d}\n\n", v); err != nil {
				return
			}
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.Done:
			return
		case <-poll.C:
			quiet += 200 * time.Millisecond
		}
	}
}

func statusOf(err error) int {
	switch djinn.KindOf(err) {
	case djinn.InvalidArgument:
		return http.StatusBadRequest
	case djinn.NoSuchObject, djinn.UnknownLease, djinn.UnknownTransaction:
		return http.StatusNotFound
	case djinn.PermissionDenied:
		return http.StatusForbidden
	case djinn.Unavailable:
		return http.StatusServiceUnavailable
	case djinn.CannotAbort, djinn.CannotCommit:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
