// Package mailbox is the event mailbox service (the Jini Event Mailbox
// Service Specification, EM; docs/specs.md): a third-party agent (EV.3.3)
// that stores remote events for its clients and forwards them when asked.
//
// A registration owns a lease (granted in the same log entry that creates the
// registration), a mailbox listener that event generators notify, an optional
// delivery target, a list of stored events in arrival order, and the
// unknown-event list of EM.4.1. All of it is replicated state: every call that
// changes it is one log command, so every call is atomic (EM.3) and nothing
// acknowledged is lost across crashes.
//
// Delivery runs on the leader only. The state machine tells an attached Sink
// (the leader's deliverer) of each change in log order; the deliverer feeds
// the shared delivery engine (internal/event), which sends stored events to
// the target in arrival order, retrying indefinite failures with backoff until
// the lease ends. Delivered events are forgotten by a logged command, in
// batches. A definite failure disables delivery (EM.4.1's encouraged
// behaviour); an UnknownEvent from the target adds the event's (source, id)
// to the registration's unknown-event list, after which generators get
// UnknownEvent for it and stored events that match are skipped.
//
// Delivery is at least once: an event delivered just before a leader crashed,
// but not yet forgotten in the log, is delivered again by the next leader.
// Listeners can tell by the (source, event id, sequence number) triple, which
// EV.2.3.2 makes unique per event.
//
// EnableDelivery and DisableDelivery are blocking in the sense of EM.4.1:
// when they return, any delivery attempt to the previous target has been
// cancelled and finished, so the client may unexport the old listener.
// Cancelling a call does not stop the listener by itself (the cancellation
// reaches it later), so the sender then asks the listener to stop the call
// (EventListener.StopDelivery) and waits for its answer, which Drop waits
// for in turn. Each registration's work runs apart from the others', so
// the wait of one holds up no other registration.
//
// Pull mode (River's MailboxPullRegistration) streams stored events after an
// index to a client that cannot accept connections; the client acknowledges
// what it has processed, and can resume from any index it has not
// acknowledged. Push and pull are exclusive, as in River: a pull (the
// MailboxPull command) disables push delivery and supersedes the earlier
// pull stream; enabling delivery to a target supersedes the pull stream. A
// registration numbers its current pull stream in the replicated state, so
// the rule holds on every leader, and a superseded stream ends with
// InvalidIterator: one consumer at a time, and a superseded one is told.
//
// A delivery stream (Deliveries, stream.go) is such a consumer with its
// acknowledgements on the stream itself and a window of events in flight:
// the way to receive a registration's events as they are stored, in order,
// without a call per event or per acknowledgement. A shared stream
// (shared.go) carries several registrations of one caller, each served as
// a stream of its own, and packs their ready events into each message.
package mailbox
