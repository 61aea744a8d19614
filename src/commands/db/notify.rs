//! Recording keyspace events in Redis' order ([`Db::notify`] and its forms).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::Db;
use crate::backend::KvBackend;
use crate::codec::Metadata;
use crate::commands::notify::{Event, NotifyFlags};
use crate::commands::reply::CommandResult;

impl<B: KvBackend> Db<'_, B> {
    /// Records the event `name` of `class` on `key` in the selected database; a command
    /// calls it right after the [`Db::commit`] that made the change, in Redis' order.
    pub(crate) fn notify(&self, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.notify_in(self.index, class, name, key);
    }

    /// Records a collection edit: `name` of `class` on `key`, then `del` when the edit left
    /// `meta` empty (the collection is gone, as Redis deletes an emptied one).
    pub(crate) fn notify_edit(
        &self,
        class: NotifyFlags,
        name: &'static str,
        key: &[u8],
        meta: &Metadata<'_>,
    ) {
        self.notify(class, name, key);
        if meta.size == 0 && !meta.blind_write {
            self.notify(NotifyFlags::GENERIC, "del", key);
        }
    }

    /// Before a STORE command replaces `dst` with a result (`empty` or not): whether `dst`
    /// has a record, expired or not (an empty result deletes it, and Redis' `dbDelete`
    /// reports `del` for whatever it found). A non-empty result looks `dst` up first, as
    /// Redis' `setKey` does, so an expired `dst` is reported expired.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn store_target(&self, dst: &[u8], empty: bool) -> CommandResult<bool> {
        if empty {
            let mkey = self.metadata_key(dst);
            // A key this command found expired is gone already, as in Redis.
            let gone = self.journal.borrow().found_expired(&mkey);
            Ok(!gone && self.metadata_record(&mkey)?.is_some())
        } else {
            Ok(self.lookup(dst)?.is_some())
        }
    }

    /// Records a STORE command's event after its commit: `name` of `class` for a non-empty
    /// result, else `del` when `dst` had a record ([`Db::store_target`]).
    pub(crate) fn notify_store(
        &self,
        class: NotifyFlags,
        name: &'static str,
        dst: &[u8],
        empty: bool,
        existed: bool,
    ) {
        if !empty {
            self.notify(class, name, dst);
        } else if existed {
            self.notify(NotifyFlags::GENERIC, "del", dst);
        }
    }

    /// [`Db::notify`] for a key of database `db` (COPY … DB, MOVE).
    pub(crate) fn notify_in(&self, db: usize, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.record_event(db, class, name, key, true);
    }

    /// [`Db::notify`] for a change Redis makes without signalling the key (a stream's
    /// consumer groups: XGROUP, XACK, XCLAIM, XREADGROUP…): the event only.
    pub(crate) fn notify_unsignalled(&self, class: NotifyFlags, name: &'static str, key: &[u8]) {
        self.record_event(self.index, class, name, key, false);
    }

    fn record_event(&self, db: usize, class: NotifyFlags, name: &'static str, key: &[u8], signal: bool) {
        let mut journal = self.journal.borrow_mut();
        let journal = &mut *journal;
        if let Some(i) = journal.created.iter().position(|(d, k)| *d == db && k == key) {
            let (db, key) = journal.created.remove(i);
            journal.scratch.pending.push(Event { class: NotifyFlags::NEW, name: "new", db, key });
        }
        let scratch = &mut journal.scratch;
        scratch.pending_effects.count(name);
        if signal && self.shared.records_modified() {
            let start = scratch.keys.len();
            scratch.keys.extend_from_slice(key);
            scratch.signalled.push((db, start..scratch.keys.len()));
        }
        if self.shared.events.load(Ordering::Relaxed) {
            scratch.pending.push(Event { class, name, db, key: Bytes::copy_from_slice(key) });
        }
    }

    /// Records `new` for `key` in database `db` now, even if it existed: RENAME, COPY and
    /// RESTORE replace a key by deleting and re-adding it, and Redis announces the add
    /// before their own events.
    pub(crate) fn notify_new_in(&self, db: usize, key: &[u8]) {
        if self.shared.new_events.load(Ordering::Relaxed) {
            let mut journal = self.journal.borrow_mut();
            journal.created.retain(|(d, k)| !(*d == db && k == key));
            journal.scratch.pending.push(Event {
                class: NotifyFlags::NEW,
                name: "new",
                db,
                key: Bytes::copy_from_slice(key),
            });
        }
    }
}
