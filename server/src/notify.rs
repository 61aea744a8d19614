//! Keyspace notifications (`notify-keyspace-events`): the events the library reports for
//! each command (`Session::events`) and for active expiry, published on
//! `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>` as Redis does.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::server::{Effects, Event, NotifyFlags};

use crate::state::State;

/// The flags in force.
fn flags(state: &State) -> NotifyFlags {
    NotifyFlags::from_bits(state.notify_flags.load(Relaxed))
}

/// Publishes a command's events (nothing to do when notifications are off).
pub fn publish(state: &State, events: &[Event]) {
    if events.is_empty() || state.notify_flags.load(Relaxed) == 0 {
        return;
    }
    let flags = flags(state);
    for event in events {
        for (channel, message) in event.messages(flags) {
            state.pubsub.publish(&state.loops, &channel, &message, false);
        }
    }
}

/// What a command did besides its notifications ([`Effects`]): the keys it found expired
/// (INFO `expired_keys`, as Redis' lazy expiry) and its changes (`rdb_changes_since_last_save`:
/// one per key modification; a RENAME or MOVE counts once), counted in `lane` (the event
/// loop's index, or [`crate::counters::LaneSum::shared_lane`] on another thread). Then
/// publishes its events.
pub fn command_events(state: &State, lane: usize, effects: Effects, events: &[Event]) {
    if effects.expired > 0 {
        state.maint.expired_keys.fetch_add(effects.expired, Relaxed);
    }
    if effects.changes > 0 {
        state.dirty.add(lane, effects.changes);
    }
    if !events.is_empty() {
        publish(state, events);
    }
}

/// Publishes `expired` for the (database, key) pairs active expiry deleted.
pub fn expired(state: &State, keys: &[(usize, Bytes)]) {
    if keys.is_empty() || state.notify_flags.load(Relaxed) == 0 {
        return;
    }
    let events: Vec<Event> = keys.iter().map(|(db, key)| Event::expired(*db, key.clone())).collect();
    publish(state, &events);
}

/// Takes `notify-keyspace-events` (and `stream-node-max-entries` and the `lazyfree-lazy-*`
/// deletions, the other settings every engine holds) from the configuration (at start and
/// after CONFIG SET).
pub fn configure(state: &State) {
    let flags =
        NotifyFlags::parse(state.config().get("notify-keyspace-events").as_bytes()).unwrap_or_default();
    state.notify_flags.store(flags.bits(), Relaxed);
    let node_entries = state.config().number("stream-node-max-entries").max(0) as u64;
    let lazy = state.config().lazy_deletes();
    for engine in state.engines() {
        // Events cost a copy of each key written: recorded only while some class is on.
        engine.set_events(flags != NotifyFlags::NONE);
        engine.set_new_events(flags.contains(NotifyFlags::NEW));
        engine.set_stream_node_entries(node_entries);
        engine.set_lazy_deletes(lazy);
    }
}
