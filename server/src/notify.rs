//! Keyspace notifications (`notify-keyspace-events`): the events of each command, and of
//! active expiry, published on `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`.

use bytes::Bytes;

use crate::state::{SharedEngine, State};

/// Publishes `expired` for keys active expiry deleted from database `db` (metadata keys).
pub fn expired(state: &State, engine: &SharedEngine, db: usize, metadata_keys: &[Bytes]) {
    if metadata_keys.is_empty() {
        return;
    }
    let flags = state.config().get("notify-keyspace-events").to_string();
    let on = flags.contains('x') || flags.contains('A');
    if !on || !(flags.contains('K') || flags.contains('E')) {
        return;
    }
    let Some(layout) = engine.db_layout(db) else { return };
    for key in metadata_keys {
        let Ok(decoded) = layout.decode_metadata_key(key) else { continue };
        event(state, &flags, db, b"expired", decoded.user_key);
    }
}

/// Publishes one event on the channels `flags` enable.
fn event(state: &State, flags: &str, db: usize, event: &[u8], key: &[u8]) {
    if flags.contains('K') {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        state.pubsub.publish(state, &channel, event, false);
    }
    if flags.contains('E') {
        let mut channel = format!("__keyevent@{db}__:").into_bytes();
        channel.extend_from_slice(event);
        state.pubsub.publish(state, &channel, key, false);
    }
}
