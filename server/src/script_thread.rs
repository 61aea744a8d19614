//! Where scripts run, and what they need of the server: [`run_command`] runs a client's
//! script command on its event loop, or, for a script that gives up there (see
//! [`scripting::Caller::inline_until`]), on the script thread [`spawn`] starts, which runs
//! what the loops hand it one at a time and answers through their mailboxes. The server's
//! shared state is the scripts' [`scripting::Host`] (in `client::scripts`).

use std::sync::Arc;

use bytes::Bytes;
use rediskv::{Reply, Session};

use crate::acl::User;
use crate::client_info::ClientInfo;
use crate::scripting::{self, Caller, Job};
use crate::state::State;
use crate::store::SharedEngine;

/// Starts the thread that runs the scripts that gave up on their event loop, one at a time:
/// their clients wait parked while their loops go on serving, so BUSY replies and SCRIPT
/// KILL reach every client, whatever loop it is on.
pub fn spawn(state: Arc<State>) {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    if state.scripts.jobs.set(tx).is_err() {
        return;
    }
    std::thread::Builder::new()
        .name("scripts".into())
        .stack_size(scripting::STACK_SIZE)
        .spawn(move || {
            for job in rx {
                run_job(&state, job);
            }
        })
        .expect("spawn the script thread");
}

/// A client's script command (EVAL, EVALSHA, FCALL and their read-only forms) and what of
/// the client it needs.
pub struct Request<'a> {
    /// The command and its arguments.
    pub argv: &'a [Bytes],
    /// The command's lowercase name.
    pub name: &'a str,
    /// The engine of the client's namespace.
    pub engine: &'a SharedEngine,
    /// The client.
    pub info: &'a ClientInfo,
    /// Its ACL user.
    pub user: &'a User,
    /// `user` may not run everything.
    pub restricted: bool,
    /// The client tracks the keys its reads name (CLIENT TRACKING, caching included).
    pub tracks_reads: bool,
}

/// A script command's answer.
pub struct Outcome {
    /// Its reply.
    pub reply: Reply,
    /// The invalidation pushes its own writes owe its client, to write after the reply.
    pub pushes: Vec<u8>,
    /// The reply is an error a command of the script answered, counted in INFO errorstats
    /// already.
    pub error_counted: bool,
}

/// A script that gave up on its event loop, having changed nothing.
pub struct GaveUp {
    /// It gave up while it ran ([`scripting::RunFacts::handing`]): the script thread takes
    /// it over as the script on its way ([`Job::handed`]).
    pub handing: bool,
}

/// Runs a script command for a client with its `session`: on its event loop when `inline`
/// (it may give up there), else to its end; `handed`: it gave up on the loop while it ran.
pub fn run_command(
    state: &State,
    request: &Request<'_>,
    session: &mut Session,
    inline: bool,
    handed: bool,
) -> Result<Outcome, GaveUp> {
    let user_may = scripting::acl_check(request.user, request.restricted);
    let cluster = state.cluster.get();
    // Each command a script runs: its user's ACL, then (in a cluster) its keys this node's.
    let acl = |cmd: &[Bytes]| {
        user_may(cmd)?;
        cluster.map_or(Ok(()), |cluster| cluster.script_command(cmd))
    };
    let Request { argv, name, engine, info, tracks_reads, .. } = *request;
    let mut caller = Caller {
        host: state,
        engine,
        session,
        acl: &acl,
        inline_until: inline.then(|| std::time::Instant::now() + scripting::INLINE_BUDGET),
        handed,
        lane: if inline { info.loop_index } else { usize::MAX },
        facts: Default::default(),
    };
    let read_only = name.ends_with("_ro");
    let mut run = || match name.strip_prefix("eval") {
        Some(rest) => scripting::eval(argv, &mut caller, rest.starts_with("sha"), read_only),
        None => scripting::fcall(argv, &mut caller, read_only),
    };
    // In a cluster, routed again by the table its commits are fenced by (the connection
    // routed it by the table of that moment).
    let reply = match cluster {
        Some(cluster) => cluster.run_routed(
            &state.store,
            argv,
            info.tls.load(std::sync::atomic::Ordering::Relaxed),
            &mut run,
        ),
        None => run(),
    };
    let facts = std::mem::take(&mut caller.facts);
    if facts.abandoned.get() {
        return Err(GaveUp { handing: facts.handing.get() });
    }
    let lane = if inline { info.loop_index } else { state.dirty.shared_lane() };
    crate::maint::after_writes(state, lane, engine, session);
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
            && facts.read_any.get()
            && !reply.is_error()
            && let Ok((keys, _)) = scripting::split_keys(argv)
        {
            let max = state.config().number("tracking-table-max-keys").max(0) as usize;
            state.tracking.remember(state.peers(), engine.layout().namespace(), keys, info.id, max, &mut to);
        }
    }
    state.blocked.wake(state, engine, session);
    Ok(Outcome { reply, pushes, error_counted: facts.error_counted.get() })
}

/// Runs one job to its end and sends the client its answer, and its session, through its
/// loop.
fn run_job(state: &State, mut job: Job) {
    let started = std::time::Instant::now();
    let request = Request {
        argv: &job.argv,
        name: &job.name,
        engine: &job.engine,
        info: &job.info,
        user: &job.user,
        restricted: job.restricted,
        tracks_reads: job.tracks_reads,
    };
    let Ok(Outcome { reply, pushes, error_counted }) =
        run_command(state, &request, &mut job.session, false, job.handed)
    else {
        unreachable!("a script runs to its end off its loop")
    };
    // The connection counted the call when it handed it here; the latency monitor sees the
    // script's own run, and its error, as Redis counts it, only the script's answer knows.
    state.latency.observe("command", started.elapsed().as_micros() as u64);
    if let Reply::Error(text) = &reply {
        if !error_counted {
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
