//! The script commands: EVAL, EVALSHA, FCALL and their read-only forms (on the client's
//! event loop, or on the script thread while the client parks), SCRIPT and FUNCTION (see
//! [`crate::scripting`]).

use bytes::Bytes;
use rediskv::server::table::{CommandInfo, flag};
use rediskv::{Reply, Session};

use super::{Client, Next, dispatch};
use crate::clock::unix_micros;
use crate::script_thread;
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
    /// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: the script runs atomically in
    /// the engine, with this client's ACL user checking each command it runs, here on the
    /// client's event loop; one that gives up here (see [`scripting::Caller::inline_until`])
    /// runs on the script thread while the client parks, its answer coming back through the
    /// loop's mailbox.
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
        let monitored = state.monitors.any();
        if monitored && !self.session.in_multi() {
            // MONITOR shows the script command, then the commands it runs (as `[db lua]`).
            state.monitors.feed(&state.loops, argv, unix_micros(), self.session.db(), &self.info.addr);
        }
        let request = script_thread::Request {
            argv,
            name,
            engine: &self.engine,
            info: &self.info,
            user: &self.user,
            restricted: self.restricted,
            tracks_reads: self.tracking && self.remembers_reads(),
        };
        // Not while MONITOR shows the commands scripts run: a run given up would show them
        // twice.
        let mut handed = false;
        if !monitored {
            match script_thread::run_command(state, &request, &mut self.session, true, false) {
                Ok(outcome) => return (self.script_answer(outcome, name, state), Next::Continue),
                Err(gave_up) => handed = gave_up.handing,
            }
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
            tracks_reads: request.tracks_reads,
            handed,
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
            Err(job) => {
                // No script thread: run it here, to its end.
                let job = *job;
                self.session = job.session;
                let Ok(outcome) =
                    script_thread::run_command(state, &request, &mut self.session, false, handed)
                else {
                    unreachable!("a script runs to its end off its loop")
                };
                (self.script_answer(outcome, name, state), Next::Continue)
            }
        }
    }

    /// A script's reply, its pushes kept for after it; an error a command of the script
    /// answered is not counted again. In EXEC, where no one counts the reply, its error is
    /// counted here, as the script thread counts those of the scripts it runs.
    fn script_answer(&mut self, outcome: script_thread::Outcome, name: &str, state: &State) -> Reply {
        self.pushes.extend_from_slice(&outcome.pushes);
        match &outcome.reply {
            Reply::Error(text) if self.in_exec => {
                if !outcome.error_counted {
                    state.stats.error(text);
                }
                state.stats.commands.count_failure(name);
            }
            _ => self.error_counted.set(outcome.error_counted),
        }
        outcome.reply
    }
}

/// The server, as the scripts see it: its server commands through [`dispatch::script_handler`].
impl scripting::Host for State {
    fn scripts(&self) -> &scripting::Scripts {
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
            self.monitors.feed(&self.loops, argv, unix_micros(), db, "lua");
        }
    }

    fn count(&self, lane: usize, info: &CommandInfo, usec: u64, failed: bool) {
        self.stats.commands.count(lane, info, Some(usec), failed);
    }

    fn count_error(&self, refused: Option<&CommandInfo>, error: &str) {
        self.stats.error(error);
        if let Some(info) = refused {
            let stats = &self.stats.commands;
            stats.count(stats.lanes() - 1, info, None, true);
        }
    }

    fn runs_for_scripts(&self, info: &CommandInfo) -> bool {
        dispatch::script_handler(info).is_some()
    }

    fn replicates_publish(&self) -> bool {
        self.cluster.get().is_none()
    }

    fn server_command(&self, info: &'static CommandInfo, argv: &[Bytes]) -> Reply {
        match dispatch::script_handler(info) {
            Some(run) => run(self, info, argv),
            None => Reply::Error("ERR This Redis command is not allowed from script".into()),
        }
    }
}
