// Package event is the remote-event delivery engine shared by every djinn
// service: it sends queued RemoteEvents to listeners (EV.2.3), in order, one
// batch at a time per key, and retries what fails the way the event mailbox
// specification asks (EM.4.1): indefinite failures are retried with backoff
// for as long as the caller keeps the key, definite ones stop delivery until
// the caller says otherwise.
//
// A key is whatever the caller delivers for: a mailbox registration, a
// lookup notification registration. Each key has a target listener and a
// queue of Items. The caller owns what is durable (for the mailbox, the
// stored events in the Raft log); the engine keeps only what is on its way
// and reports progress through Config.OnDelivered with the Cursor of the
// last accepted item, so the caller can forget delivered events.
//
// # Design
//
// One worker per active key. A key is active while it has items queued or
// in flight; Push hands it to a worker, and the worker leaves the key, which
// is forgotten, as soon as its queue is empty, so idle keys (there may be
// 100k registrations) cost no goroutine and no memory. Workers are
// long-lived goroutines: one whose key emptied waits, up to 128 at a time
// and for 10 s, for the next key to become active, so that delivering one
// event at a time does not start a goroutine per event and grow its stack
// again through every listener call. A key never has two workers, so
// reusing them changes no order. A worker runs rounds:
// take up to MaxBatch items from the head of the queue, Send them, remove the
// accepted prefix, and on a failure ask Config.OnFailure what to do with the
// first refused item (Retry after a backoff, Skip it, or Stop the queue).
// Sends across keys run in parallel; Config.MaxInFlight optionally bounds
// how many run at once. A worker blocked in Send, in the MaxInFlight queue or
// in a backoff wait holds no lock.
//
// A worker-per-key design was chosen over a pool with a ready queue and a
// timer heap because per-key order then needs no extra machinery and a
// waiting key costs one parked goroutine and one timer; with a bounded
// MaxInFlight the Sends themselves are bounded either way.
//
// Backoff is exponential with "equal jitter": after the k-th consecutive
// failed round the worker waits a random duration between d/2 and d, where
// d = MinBackoff·2^(k-1) capped at MaxBackoff. Any progress (an accepted
// event, a skipped one, a retarget) resets k. A listener that always fails
// therefore costs one Send per MaxBackoff/2 at most, never a spin.
//
// All state lives in one mutex-guarded struct per engine; callbacks and Send
// run without the lock held. Time comes from the time package only through
// timers, so tests run under testing/synctest with fake time.
//
// # Invariants
//
//   - At most one Send is in flight per key, and a key's items are offered
//     to listeners in Push order; a retried batch starts at the first item
//     not yet accepted. (The one exception is a Push racing with a Drop of
//     the same key from another goroutine: the new queue may start sending
//     while the dropped one's cancelled Send is still returning.)
//   - A key is in the engine's map if and only if a worker is running it.
//   - Cursors of a key's queued items are strictly increasing, so "delivered
//     through cursor c" is well defined; Push enforces it.
//   - Items in flight are never removed by Discard; Retarget and Drop cancel
//     the in-flight Send (through its context) and wait for it, and for the
//     callbacks that follow it, before they return.
//   - After Drop(key) returns no callback runs for that key's dropped queue;
//     after Close returns no goroutine of the engine runs, idle or busy.
//
// # Caveats
//
//   - A Sender must honour its context: Retarget, Drop and Close block until
//     the Send they cancel returns. client.EventSender takes one round trip
//     more (bounded) to have the listener confirm it stopped handing the
//     cancelled call's events, which makes Drop's promise hold at the
//     listener too; callers that serve many keys run each key's Drops apart
//     (Serial), so that one slow listener holds up no other key.
//   - OnDelivered, OnFailure and Discard's match function must not call
//     Retarget, Drop or Close (they would wait for themselves). OnDelivered
//     and OnFailure may call Push, Discard and Stats; match may call nothing
//     on the engine, since it runs with the engine's lock held.
//   - An event accepted by the old listener while Retarget or Drop was
//     cancelling its Send is still reported through OnDelivered: it was
//     delivered. Events refused by a cancelled Send are not reported as
//     failures; they stay queued for the new target (Retarget) or are gone
//     (Drop, Close).
//   - An OnFailure decision made while the key was retargeted is ignored:
//     the failure was the old listener's, so the item is sent to the new one.
//   - Nothing here is durable. A caller that must not lose events keeps them
//     until OnDelivered reports them and pushes them again after a restart or
//     a change of leader; listeners see duplicates then, which the event
//     sequence numbers let them recognise (EV.2.3.2).
package event
