//! The zset commands.

use super::Command;
use crate::backend::KvBackend;

/// This family's command table.
pub(super) fn command<B: KvBackend>(name: &str) -> Option<Command<B>> {
    let _ = name;
    None
}
