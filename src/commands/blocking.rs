//! [`Block`]: what a blocking command (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP, XREAD/XREADGROUP with BLOCK, WAIT with replicas to wait for) answers instead of a reply when it
//! cannot be served now.
//!
//! The protocol a server follows is on [`Block`].

use std::time::Duration;

use bytes::Bytes;

use super::Reply;

/// A command that would block: where and how long to wait, and what to answer at the end.
///
/// The library does no I/O and has no clients to wake, so blocking is split:
///
/// 1. [`super::Engine::execute`] runs the command. If it could be served it replies as
///    usual. If not, it records a [`Block`] in the session — take it with
///    [`super::Session::take_block`] — and its returned reply is **not** an answer (do not
///    send it; it is [`Block::timeout_reply`], for callers that ignore blocking).
/// 2. The server parks the client with the block's [`Block::keys`] in database
///    [`Block::db`] and a deadline of now + [`Block::timeout`] (`None`: forever).
/// 3. After any command, the keys it touched ([`super::Session::touched`], decoded by
///    [`super::Engine::touched_key`]) and the databases it swapped
///    ([`super::Session::swapped_dbs`]) name the parked clients that may now be served. The
///    server re-runs each such client's same argv ([`Block::retry_argv`] when it has one) with the same session through
///    [`super::Engine::retry`], in the order the clients blocked: if it blocks again (a new [`Block`] in the session) the client stays
///    parked with its first deadline; otherwise the reply is its answer, and the keys that
///    run touched wake further clients (a BLMOVE pushing to a list another client waits on).
/// 4. At the deadline the server sends [`Block::timeout_reply`] (written in the client's
///    protocol like any reply: the nil array, `_` in RESP3; WAIT's `0`).
///
/// Inside MULTI (EXEC), and through [`super::Db::execute`], nothing blocks: the command
/// answers at once what Redis answers in a transaction (the nil array, a nil bulk for
/// BLMOVE/BRPOPLPUSH, WAIT's `0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The user keys whose modification may let the command be served (BLMOVE: its source
    /// only; WAIT: none — only the deadline ends it).
    pub keys: Vec<Bytes>,
    /// The database those keys live in (the session's selected database).
    pub db: usize,
    /// How long to wait, from when the client is parked; `None` waits forever (timeout 0).
    pub timeout: Option<Duration>,
    pub(crate) on_timeout: Reply,
    pub(crate) retry_argv: Option<Vec<Bytes>>,
}

impl Block {
    /// The answer when the timeout passes: the nil array (`_` in RESP3) for every list and
    /// zset command, BLMOVE and BRPOPLPUSH included (Redis 7.0 answers those a nil bulk only
    /// inside MULTI); `0` for WAIT.
    pub fn timeout_reply(&self) -> Reply {
        self.on_timeout.clone()
    }

    /// The argv to re-run instead of the command's own, when its meaning must not change
    /// while it waits (XREAD's `$` stands for the stream's last id when it blocked);
    /// `None`: the command's own.
    pub fn retry_argv(&self) -> Option<&[Bytes]> {
        self.retry_argv.as_deref()
    }
}
