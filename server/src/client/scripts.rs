//! The script commands: EVAL, EVALSHA, FCALL and their read-only forms (the client parks
//! while the script thread runs the script), SCRIPT and FUNCTION (see [`crate::scripting`]).

use bytes::Bytes;
use rediskv::commands::table::{CommandInfo, flag};
use rediskv::commands::{Reply, Session};

use super::{Client, Next};
use crate::clock::unix_micros;
use crate::scripting;
use crate::state::State;

pub(super) fn script_command(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    (scripting::script_command(argv, &state.scripts), Next::Continue)
}

/// FUNCTION: its libraries are saved with the store after every change, and a change is
/// propagated to the replicas.
pub(super) fn function(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let reply = scripting::function_command(argv, &state.scripts, &|scripts| {
        if let Err(e) = state.store.save_functions(&scripts.dump_codes()) {
            crate::log::warning!("Cannot save the function libraries: {e}");
        }
    });
    if !reply.is_error() && info.has(flag::WRITE) {
        state.replication.propagate_command(c.session.db(), argv);
    }
    (reply, Next::Continue)
}

impl Client {
    /// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: the client parks and the script
    /// thread runs the script atomically in the engine, with this client's ACL user checking
    /// each command it runs; its answer comes back through the loop's mailbox.
    pub(super) fn eval(
        &mut self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> (Reply, Next) {
        let name = info.name;
        if argv.len() < 3 {
            return (
                Reply::Error(format!("ERR wrong number of arguments for '{name}' command")),
                Next::Continue,
            );
        }
        if state.monitors.any() && !self.session.in_multi() {
            // MONITOR shows the script command, then the commands it runs (as `[db lua]`).
            state.monitors.feed(&state.loops, argv, unix_micros(), self.session.db(), &self.info.addr);
        }
        // A script queued in a transaction answers into EXEC's reply: wait for it here.
        let (answer, answered) = if self.in_exec {
            let (tx, rx) = std::sync::mpsc::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let session = std::mem::replace(&mut self.session, Session::new(self.info.id));
        let job = scripting::Job {
            argv: argv.to_vec(),
            name: name.to_string(),
            session,
            engine: self.engine.clone(),
            info: self.info.clone(),
            user: self.user.clone(),
            restricted: self.restricted,
            tracks_reads: self.tracking && self.remembers_reads(),
            answer,
        };
        match state.scripts.submit(job) {
            Ok(()) if answered.is_some() => {
                let fresh = || Box::new(Session::new(self.info.id));
                let (reply, pushes, session) = answered.and_then(|rx| rx.recv().ok()).unwrap_or_else(|| {
                    (Reply::Error("ERR the script thread stopped".into()), Vec::new(), fresh())
                });
                self.session = *session;
                self.pushes.extend_from_slice(&pushes);
                (reply, Next::Continue)
            }
            Ok(()) => {
                self.parked_until = Some(None);
                (Reply::NilArray, Next::Parked)
            }
            Err(mut job) => {
                // No script thread: run it here.
                let (reply, pushes) = crate::script_thread::run_command(state, &mut job);
                self.session = job.session;
                self.pushes.extend_from_slice(&pushes);
                (reply, Next::Continue)
            }
        }
    }
}
