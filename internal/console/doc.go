// Package console is the operator's web console that djinn serves on its
// admin port: one page per service — the cluster, leases, event
// mailboxes, renewal sets, transactions, lock sets, lookup and lookup
// discovery — updated live as the replicated state changes.
//
// Everything it needs is in the binary (go:embed): a page, a stylesheet
// and a small script of its own, no framework and nothing fetched at run
// time. The console knows no service: a Source gives it the pages, a
// JSON view of each (read in process from the services' state) and the
// actions an operator may take.
//
// Reading is for whoever the admin port lets in (Source.Reader decides).
// An action is a POST that needs the operator role (Source.Operator) and
// carries the header Djinn-Confirm, which a page sends only after the
// operator confirmed in a dialog and which no cross-site form can send.
//
// Live updates are server-sent events (/api/events): an event each time
// Source.Version changes (the applied log index) and every few seconds
// besides, since lease renewals are not logged; the page then reads its
// view again. Countdowns run in the page, from the server's clock.
package console
