//! MONITOR: every command the server runs, as one status line per command to each
//! monitoring client, in Redis 7.0's format: `+<unix secs>.<µs> [<db> <addr>] "arg" …`, each
//! argument quoted as `sdscatrepr` quotes it, credentials redacted. Commands Redis keeps out
//! (admin commands, those refused before running) are left out here too.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::client_info::ClientInfo;
use crate::mailbox::Loops;
use crate::mailbox::Message;
use crate::sync::lock;

/// The monitoring clients.
#[derive(Default)]
pub struct Monitors {
    clients: Mutex<Vec<Arc<ClientInfo>>>,
    count: AtomicUsize,
}

impl Monitors {
    /// Whether anyone monitors (one atomic load: the common case costs nothing more).
    pub fn any(&self) -> bool {
        self.count.load(Relaxed) > 0
    }

    /// Adds a monitoring client; false when it monitors already.
    pub fn add(&self, client: &Arc<ClientInfo>) -> bool {
        let mut clients = lock(&self.clients);
        if clients.iter().any(|c| c.id == client.id) {
            return false;
        }
        clients.push(client.clone());
        self.count.store(clients.len(), Relaxed);
        true
    }

    /// Removes a client (RESET, disconnect); nothing when it does not monitor.
    pub fn remove(&self, id: u64) {
        let mut clients = lock(&self.clients);
        clients.retain(|c| c.id != id);
        self.count.store(clients.len(), Relaxed);
    }

    /// Sends the line for `argv`, run at `unix_micros` by the client at `addr` on database
    /// `db`, to every monitoring client.
    pub fn feed(&self, loops: &Loops, argv: &[Bytes], unix_micros: u64, db: usize, addr: &str) {
        let line = line(argv, unix_micros, db, addr);
        for client in lock(&self.clients).iter() {
            let message = Message::Deliver { token: client.token, client: client.id, bytes: line.clone() };
            loops.send(client.loop_index, message);
        }
    }
}

/// One monitor line, CRLF included.
fn line(argv: &[Bytes], unix_micros: u64, db: usize, addr: &str) -> Vec<u8> {
    let mut out =
        format!("+{}.{:06} [{db} {addr}]", unix_micros / 1_000_000, unix_micros % 1_000_000).into_bytes();
    for (i, arg) in argv.iter().enumerate() {
        out.push(b' ');
        if crate::slowlog::redacted(argv, i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote(arg, &mut out);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Redis' `sdscatrepr`: a double-quoted string with `\\ \" \n \r \t \a \b` escaped and every
/// other non-printable byte as `\xhh`.
fn quote(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as a redis-server 7.0 MONITOR printed them for the same commands.
    #[test]
    fn lines_are_quoted_and_redacted_as_redis_prints_them() {
        let argv = |args: &[&[u8]]| args.iter().map(|a| Bytes::copy_from_slice(a)).collect::<Vec<_>>();
        let at = 1_795_405_717_000_173;
        assert_eq!(
            line(&argv(&[b"set", b"k", b"a b\"c"]), at, 0, "127.0.0.1:56910"),
            b"+1795405717.000173 [0 127.0.0.1:56910] \"set\" \"k\" \"a b\\\"c\"\r\n"
        );
        assert_eq!(
            line(&argv(&[b"set", b"bin", b"a\x01\tb\\\xff"]), at, 2, "a:1"),
            b"+1795405717.000173 [2 a:1] \"set\" \"bin\" \"a\\x01\\tb\\\\\\xff\"\r\n"
        );
        assert_eq!(
            line(&argv(&[b"auth", b"pw"]), at, 0, "a:1"),
            b"+1795405717.000173 [0 a:1] \"auth\" \"(redacted)\"\r\n"
        );
    }
}
