//! Where a FAILOVER stands (see `failover`, which runs it): a leaf, so that `state` can hold
//! it without importing what a failover does.

use std::sync::Mutex;
use std::time::Instant;

use crate::sync::lock;

/// Where a failover stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// None under way.
    #[default]
    None,
    /// Writes are paused until a replica has acknowledged the whole stream.
    WaitForSync,
    /// This server is becoming its target's replica (its PSYNC carries `FAILOVER`).
    InProgress,
}

/// A failover's plan: its phase, its target, when it gives up, and whether it then fails
/// over anyway.
#[derive(Debug, Default)]
pub struct Failover {
    pub(crate) plan: Mutex<Plan>,
}

/// What FAILOVER asked for.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) phase: Phase,
    pub(crate) target: Option<(String, u16)>,
    pub(crate) deadline: Option<Instant>,
    pub(crate) force: bool,
}

impl Failover {
    /// The phase now.
    pub fn phase(&self) -> Phase {
        lock(&self.plan).phase
    }

    /// INFO replication's `master_failover_state`.
    pub fn state_name(&self) -> &'static str {
        match self.phase() {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}
