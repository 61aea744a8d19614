//! Recording the replication stream of the commands a [`Db`] runs.

use bytes::Bytes;

use super::{Db, Touch};
use crate::backend::KvBackend;
use crate::commands::Reply;
use crate::commands::propagate::{Propagated, Replicated};

impl<B: KvBackend> Db<'_, B> {
    /// Records the replication stream of the commands this `Db` runs ([`Db::take_propagated`]).
    pub(crate) fn record_propagation(&mut self) {
        self.propagated = Some(Vec::new());
    }

    /// The replication stream of the commands run since the last call, if recorded.
    pub(crate) fn take_propagated(&mut self) -> Vec<Propagated> {
        self.propagated.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Whether the replication stream is recorded, and where the journal stood before a
    /// command: its changes and its touched keys (for [`Db::propagate_command`]).
    pub(crate) fn propagation_mark(&self) -> Option<(u64, usize)> {
        self.propagated.as_ref()?;
        let journal = self.journal.borrow();
        Some((journal.effects.changes, journal.touched.len()))
    }

    /// Whether the replication stream is recorded.
    pub(crate) fn records_propagation(&self) -> bool {
        self.propagated.is_some()
    }

    /// Propagates `argv` for the running command, in place of what its arguments would
    /// (Redis' `alsoPropagate` with `preventCommandPropagation`): for effects only the
    /// command knows, as the exact trim of `MAXLEN ~` or a claimed entry's delivery count.
    /// Nothing while the stream is not recorded.
    pub(crate) fn propagate_instead(&self, argv: Vec<Bytes>) {
        if self.records_propagation() {
            self.instead.borrow_mut().get_or_insert_with(Vec::new).push(argv);
        }
    }

    /// Appends `argv`, a command the server ran itself among this `Db`'s commands (a
    /// script's PUBLISH, which Redis replicates inside the script's MULTI/EXEC), to the
    /// recorded stream as it is.
    pub(crate) fn propagate_ran(&mut self, argv: &[Bytes]) {
        let db = self.index();
        if let Some(stream) = &mut self.propagated {
            stream.push(Propagated { db, argv: argv.to_vec() });
        }
    }

    /// Appends to the recorded stream what the command just run propagates: the deletion of
    /// each key it found expired, then its effects if it changed something (or what it
    /// propagates instead, [`Db::propagate_instead`]), in the form `how` of its row.
    pub(crate) fn propagate_command(
        &mut self,
        mark: (u64, usize),
        db: usize,
        how: Replicated,
        argv: &[Bytes],
        reply: &Reply,
    ) {
        let (changes, touched) = mark;
        let journal = self.journal.borrow();
        let mut unit = Vec::new();
        for t in journal.touched.iter().skip(touched).filter(|t| t.kind == Touch::Expired) {
            if let Some((db, key)) = self.shared.decode_touched(&t.metadata_key) {
                let deletion = Propagated::deletion(db, key, self.shared.lazy_deletes().expire);
                if !unit.contains(&deletion) {
                    unit.push(deletion);
                }
            }
        }
        let changed = journal.effects.changes > changes || how == Replicated::Always;
        drop(journal);
        if let Some(instead) = self.instead.take() {
            if !reply.is_error() {
                unit.extend(instead.into_iter().map(|argv| Propagated { db, argv }));
            }
        } else if changed && !reply.is_error() {
            let exists = |key: &[u8]| matches!(self.lookup(key), Ok(Some(_)));
            let lazy = self.shared.lazy_deletes();
            let effects = crate::commands::propagate::effects(how, argv, reply, self.ran_ms, &exists, lazy);
            unit.extend(effects.into_iter().map(|argv| Propagated { db, argv }));
        }
        if let Some(stream) = &mut self.propagated {
            stream.extend(unit);
        }
    }
}
