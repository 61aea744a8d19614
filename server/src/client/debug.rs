//! DEBUG, when `enable-debug-command` allows it.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use rediskv::Reply;

use super::Client;
use crate::state::State;

impl Client {
    /// DEBUG: SLEEP, OBJECT, ERROR, LOG, SET-ACTIVE-EXPIRE, HELP when enable-debug-command
    /// allows it; everything else (RELOAD, SEGFAULT, …) is refused.
    pub(super) fn debug(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let allowed = match state.config().get("enable-debug-command") {
            "yes" => true,
            "local" => self.local,
            _ => false,
        };
        if !allowed {
            return Reply::Error(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run \
                 it from a local connection, otherwise you need to set this option in the configuration file, and \
                 then restart the server."
                    .into(),
            );
        }
        let Some(sub) = argv.get(1) else {
            return Reply::Error("ERR wrong number of arguments for 'debug' command".into());
        };
        let sub_name = String::from_utf8_lossy(sub).to_ascii_lowercase();
        match (sub_name.as_str(), argv.len()) {
            ("sleep", 3) => {
                let secs = String::from_utf8_lossy(&argv[2]).parse::<f64>().unwrap_or(0.0);
                if secs > 0.0 && secs.is_finite() {
                    std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
                }
                Reply::OK
            }
            ("error", 3) => Reply::Error(String::from_utf8_lossy(&argv[2]).into_owned()),
            ("log", 3) => {
                crate::log::warning!("DEBUG LOG: {}", String::from_utf8_lossy(&argv[2]));
                Reply::OK
            }
            ("set-active-expire", 3) => {
                state.active_expire.store(&argv[2][..] != b"0", Relaxed);
                Reply::OK
            }
            ("object", 3) => {
                debug_object(self.engine.run(&mut self.session, &[&b"object"[..], b"encoding", &argv[2]]))
            }
            ("help", 2) => Reply::Array(DEBUG_HELP.iter().map(|s| Reply::status(s)).collect()),
            _ => Reply::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                String::from_utf8_lossy(sub)
            )),
        }
    }
}

/// `+Value at:… encoding:… ` from OBJECT ENCODING's answer.
fn debug_object(encoding: Reply) -> Reply {
    match encoding {
        Reply::Bulk(enc) => Reply::Status(
            format!(
                "Value at:0x0 refcount:1 encoding:{} serializedlength:0 lru:0 lru_seconds_idle:0",
                String::from_utf8_lossy(&enc)
            )
            .into(),
        ),
        Reply::Nil => Reply::Error("ERR no such key".into()),
        other => other,
    }
}

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Accepted; expiry here is lazy plus the collector.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];
