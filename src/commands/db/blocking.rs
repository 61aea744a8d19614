//! Blocking commands: whether they may block, a woken client's re-run, and the [`Block`]
//! a command leaves instead of its reply.

use std::time::Duration;

use bytes::Bytes;

use super::Db;
use crate::backend::KvBackend;
use crate::commands::Reply;
use crate::commands::blocking::Block;
use crate::commands::error::CommandError;
use crate::commands::reply::CommandResult;

impl<B: KvBackend> Db<'_, B> {
    /// Lets blocking commands block (see [`crate::commands::blocking`]); off by default, so they
    /// answer their timeout reply at once, as inside MULTI.
    pub(crate) fn allow_blocking(&mut self) {
        self.may_block = true;
    }

    /// Marks this command as a woken client's re-run (see [`Db::waited`]).
    pub(crate) fn set_retrying(&mut self) {
        self.retrying = true;
    }

    /// Whether this command is a woken client's re-run.
    pub(crate) fn is_retrying(&self) -> bool {
        self.retrying
    }

    /// A blocking command's lookup of a key it waits on. On a re-run a key holding another
    /// type counts as missing instead of WRONGTYPE: Redis 7.0 serves a woken client only from
    /// a key of the type it waits for, and leaves it blocked otherwise.
    ///
    /// # Errors
    /// `found`'s error, except WRONGTYPE on a re-run.
    pub(crate) fn waited<T>(&self, found: CommandResult<Option<T>>) -> CommandResult<Option<T>> {
        match found {
            Err(CommandError::WrongType) if self.retrying => Ok(None),
            other => other,
        }
    }

    /// What a blocking command that found nothing to serve answers. When it may block: a [`Block`]
    /// on `keys` of the selected database for [`crate::commands::Session::take_block`], and
    /// `on_timeout` (what Redis sends when the timeout passes). Otherwise (MULTI) `at_once`, which
    /// differs for BLMOVE/BRPOPLPUSH: a nil bulk at once, a nil array at a timeout.
    pub(crate) fn would_block(
        &mut self,
        keys: &[Bytes],
        timeout: Option<Duration>,
        at_once: Reply,
        on_timeout: Reply,
    ) -> Reply {
        self.would_block_as(keys, timeout, at_once, on_timeout, None)
    }

    /// [`Db::would_block`] for a command whose re-runs must see other arguments than its
    /// first run (`retry_argv`): XREAD's `$` becomes the id it stood for then.
    pub(crate) fn would_block_as(
        &mut self,
        keys: &[Bytes],
        timeout: Option<Duration>,
        at_once: Reply,
        on_timeout: Reply,
        retry_argv: Option<Vec<Bytes>>,
    ) -> Reply {
        if !self.may_block {
            return at_once;
        }
        let keys = keys.to_vec();
        self.block = Some(Box::new(Block {
            keys,
            db: self.index,
            timeout,
            on_timeout: on_timeout.clone(),
            retry_argv,
        }));
        on_timeout
    }
}
