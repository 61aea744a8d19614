//! The script thread and what scripts need of the server: the thread runs every script of
//! every client, one at a time, and the server's shared state is the scripts' [`Host`].

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::commands::Reply;
use rediskv::commands::table::CommandInfo;

use crate::scripting::{self, Caller, Host, Job, Scripts};
use crate::state::State;

/// Starts the thread that runs every script, one at a time, with one Lua state (as Redis'
/// single Lua interpreter): an event loop hands it a script and goes on serving its other
/// clients, so BUSY replies and SCRIPT KILL reach every client, whatever loop it is on.
pub fn spawn(state: Arc<State>) {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    if state.scripts.jobs.set(tx).is_err() {
        return;
    }
    std::thread::Builder::new()
        .name("scripts".into())
        // Lua's C recursion and deep replies: more than a default thread's 2 MB.
        .stack_size(64 << 20)
        .spawn(move || {
            for job in rx {
                run_job(&state, job);
            }
        })
        .expect("spawn the script thread");
}

/// Runs a script command for a client: the reply, and the invalidation pushes its own
/// writes owe that client (to write after the reply).
pub fn run_command(state: &State, job: &mut Job) -> (Reply, Vec<u8>) {
    let user_may = scripting::acl_check(job.user.clone(), job.restricted);
    let cluster = state.cluster.get();
    // Each command a script runs: its user's ACL, then (in a cluster) its keys this node's.
    let acl = |cmd: &[Bytes]| {
        user_may(cmd)?;
        cluster.map_or(Ok(()), |cluster| cluster.script_command(cmd))
    };
    let (argv, name, engine, info, tracks_reads) =
        (&job.argv, job.name.as_str(), &job.engine, &job.info, job.tracks_reads);
    let session = &mut job.session;
    state.scripts.read_any.store(false, Relaxed);
    state.scripts.error_counted.store(false, Relaxed);
    let started = std::time::Instant::now();
    let mut run = || {
        let mut caller = Caller { host: state, engine, session: &mut *session, acl: &acl };
        match name {
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => {
                scripting::eval(argv, &mut caller, name.starts_with("evalsha"), name.ends_with("_ro"))
            }
            _ => scripting::fcall(argv, &mut caller, name == "fcall_ro"),
        }
    };
    // In a cluster, routed again by the table its commits are fenced by (the connection
    // routed it by the table of that moment).
    let reply = match cluster {
        Some(cluster) => cluster.run_routed(&state.store, argv, &mut run),
        None => run(),
    };
    // The connection counted the call when it handed it here; the latency monitor sees the
    // script's own run.
    state.latency.observe("command", started.elapsed().as_micros() as u64);
    crate::maint::after_writes(state, state.dirty.shared_lane(), engine, session);
    let mut pushes = Vec::new();
    if state.tracking.active() {
        let mut to = crate::tracking::Delivery { me: Some(info), own: &mut pushes };
        let written = engine.modified_keys(session.touched());
        if !written.is_empty() {
            state.tracking.invalidate(state.peers(), engine.layout().namespace(), &written, &mut to);
        }
        // A script that read something: its declared keys are tracked, as Redis tracks the
        // keys of the EVAL or FCALL command.
        if tracks_reads
            && state.scripts.read_any.load(Relaxed)
            && !reply.is_error()
            && let Ok((keys, _)) = scripting::split_keys(argv)
        {
            let max = state.config().number("tracking-table-max-keys").max(0) as usize;
            state.tracking.remember(state.peers(), engine.layout().namespace(), &keys, info.id, max, &mut to);
        }
    }
    state.blocked.wake(state, engine, session);
    (reply, pushes)
}

/// Runs one job and sends the client its answer, and its session, through its loop.
fn run_job(state: &State, mut job: Job) {
    let (reply, pushes) = run_command(state, &mut job);
    // The connection counted the call when it handed it here; its error, as Redis counts
    // it, only the script's answer knows.
    let counted = state.scripts.error_counted.swap(false, Relaxed);
    if let Reply::Error(text) = &reply {
        if !counted {
            state.stats.error(text);
        }
        state.stats.commands.count_failure(&job.name);
    }
    if let Some(answer) = job.answer.take() {
        let _ = answer.send((reply, pushes, Box::new(job.session)));
        return;
    }
    let info = job.info;
    let mut bytes = Vec::new();
    reply.write(crate::pubsub::protocol(&info), &mut bytes);
    bytes.extend_from_slice(&pushes);
    state.loops.send(
        info.loop_index,
        crate::mailbox::Message::Resume {
            token: info.token,
            client: info.id,
            session: Box::new(job.session),
            bytes,
        },
    );
}

impl Host for State {
    fn scripts(&self) -> &Scripts {
        &self.scripts
    }

    fn out_of_memory(&self) -> bool {
        crate::info::out_of_memory(self)
    }

    fn write_refusal(&self) -> Option<String> {
        // As Redis checks a script's writes: the store first, then the good replicas.
        let too_few_replicas = !self.link.is_replica() && self.replication.too_few_replicas();
        (self.writes.failing().then(|| self.writes.refusal()))
            .or_else(|| too_few_replicas.then(|| crate::replication::NOREPLICAS.into()))
    }

    fn monitor(&self, argv: &[Bytes], db: usize) {
        if self.monitors.any() {
            self.monitors.feed(&self.loops, argv, crate::clock::unix_micros(), db, "lua");
        }
    }

    fn count(&self, info: &CommandInfo, usec: u64, failed: bool) {
        let stats = &self.stats.commands;
        stats.count(stats.lanes() - 1, info, Some(usec), failed);
    }

    fn count_error(&self, refused: Option<&CommandInfo>, error: &str) {
        self.stats.error(error);
        if let Some(info) = refused {
            let stats = &self.stats.commands;
            stats.count(stats.lanes() - 1, info, None, true);
        }
    }

    /// PUBLISH, SPUBLISH, TIME and INFO from a script.
    fn server_command(&self, argv: &[Bytes]) -> Reply {
        match argv[0].to_ascii_lowercase().as_slice() {
            b"info" => crate::info::info(argv, self, self.engine.layout().namespace()),
            b"time" => {
                let micros = crate::clock::unix_micros();
                Reply::Array(vec![
                    Reply::bulk_int((micros / 1_000_000) as i64),
                    Reply::bulk_int((micros % 1_000_000) as i64),
                ])
            }
            name => Reply::Integer(
                self.pubsub.publish(&self.loops, &argv[1], &argv[2], name == b"spublish") as i64
            ),
        }
    }
}
