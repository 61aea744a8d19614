//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
//! [AUTH2 username password] [KEYS key…]`, as Redis 7.0: each key that exists is DUMPed and
//! sent with its remaining TTL as `RESTORE key ttl payload [REPLACE]` (after `ASKING` in
//! cluster mode, as Redis' RESTORE-ASKING), behind `AUTH` and `SELECT db`, in one write on
//! a connection of its own (`timeout` ms to connect and for each reply; 0 means 1000); the
//! connection is TLS under `tls-cluster yes`, as Redis'. The
//! keys the target acknowledged are deleted here unless COPY (one DEL, which is what
//! replicas see). The first error reply is answered `ERR Target instance replied with
//! error: …`; a connection that fails `IOERR error or timeout …`, as Redis.
//!
//! A cluster node over a store it shares with the target (the etcd engine, the target one
//! of its registered nodes) neither sends nor deletes anything: the keys are already where
//! the target reads them, and deleting them would lose them.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::args::parse_i64;

use crate::tls::Dialed;

/// A parsed MIGRATE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The target's address.
    pub host: String,
    /// The target's port.
    pub port: u16,
    /// The target's database.
    pub db: i64,
    /// For the connection and each reply.
    pub timeout: Duration,
    /// Keep the keys here.
    pub copy: bool,
    /// RESTORE … REPLACE.
    pub replace: bool,
    /// AUTH's user (AUTH2) and password.
    pub auth: Option<(Option<Bytes>, Bytes)>,
    /// The keys to move.
    pub keys: Vec<Bytes>,
}

/// Reads MIGRATE's arguments (`argv[0]` is the name), with Redis' errors in Redis' order.
pub fn parse(argv: &[Bytes]) -> Result<Request, Reply> {
    let syntax = || Reply::Error("ERR syntax error".into());
    if argv.len() < 6 {
        return Err(Reply::Error("ERR wrong number of arguments for 'migrate' command".into()));
    }
    let (mut copy, mut replace, mut auth) = (false, false, None);
    let mut keys = vec![argv[3].clone()];
    let mut at = 6;
    while at < argv.len() {
        let option = argv[at].to_ascii_lowercase();
        let more = argv.len() - 1 - at;
        match option.as_slice() {
            b"copy" => copy = true,
            b"replace" => replace = true,
            b"auth" if more >= 1 => {
                auth = Some((None, argv[at + 1].clone()));
                at += 1;
            }
            b"auth2" if more >= 2 => {
                auth = Some((Some(argv[at + 1].clone()), argv[at + 2].clone()));
                at += 2;
            }
            b"keys" => {
                if !argv[3].is_empty() {
                    return Err(Reply::Error(
                        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                            .into(),
                    ));
                }
                keys = argv[at + 1..].to_vec();
                break;
            }
            _ => return Err(syntax()),
        }
        at += 1;
    }
    let not_integer = || Reply::Error("ERR value is not an integer or out of range".into());
    let timeout = parse_i64(&argv[5]).ok_or_else(not_integer)?;
    let db = parse_i64(&argv[4]).ok_or_else(not_integer)?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let host = String::from_utf8_lossy(&argv[1]).into_owned();
    // A port that is not a number fails to connect, as in Redis (atoi).
    let port = std::str::from_utf8(&argv[2]).ok().and_then(|p| p.parse().ok()).unwrap_or(0);
    Ok(Request { host, port, db, timeout, copy, replace, auth, keys })
}

/// A key to send: its name, DUMP payload and remaining TTL in ms (0: none).
pub struct Dumped {
    /// The key.
    pub key: Bytes,
    /// Its DUMP payload.
    pub payload: Bytes,
    /// Its remaining TTL in ms, 0 for none.
    pub ttl: i64,
}

/// Sends `keys` to the target of `request` (over TLS with `tls`, as Redis under
/// `tls-cluster yes`); answers the keys it acknowledged, or the reply to give (an error, and
/// the keys acknowledged before it).
pub fn send(
    request: &Request,
    keys: &[Dumped],
    asking: bool,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Vec<Bytes>, (Reply, Vec<Bytes>)> {
    let ioerr = |writing: bool| {
        Reply::Error(format!(
            "IOERR error or timeout {} to target instance",
            if writing { "writing" } else { "reading" }
        ))
    };
    let connect_error =
        || (Reply::Error("IOERR error or timeout connecting to the client".into()), Vec::new());
    let stream = match tls {
        Some(tls) => Dialed::dial(&request.host, request.port, request.timeout, Some(tls))
            .map_err(|_| connect_error())?,
        None => {
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(request.host.as_str(), request.port))
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(connect_error)?;
            // As Redis, whose connect only waits for the socket to be writable: a refused
            // connection fails at the first write.
            let out = TcpStream::connect_timeout(&addr, request.timeout).map_err(|e| match e.kind() {
                std::io::ErrorKind::ConnectionRefused => (ioerr(true), Vec::new()),
                _ => connect_error(),
            })?;
            let _ = out.set_read_timeout(Some(request.timeout));
            let _ = out.set_write_timeout(Some(request.timeout));
            Dialed::Plain(out)
        }
    };
    let _ = stream.tcp().set_nodelay(true);
    let mut input = BufReader::new(stream);
    let mut bytes = Vec::new();
    let mut leading = 0;
    if let Some((user, password)) = &request.auth {
        let mut argv: Vec<&[u8]> = vec![b"AUTH"];
        argv.extend(user.as_deref());
        argv.push(password);
        crate::replication::encode(&mut bytes, argv);
        leading += 1;
    }
    let db = request.db.to_string();
    crate::replication::encode(&mut bytes, [&b"SELECT"[..], db.as_bytes()]);
    leading += 1;
    for key in keys {
        if asking {
            crate::replication::encode(&mut bytes, [&b"ASKING"[..]]);
        }
        let ttl = key.ttl.to_string();
        let mut argv: Vec<&[u8]> = vec![b"RESTORE", &key.key, ttl.as_bytes(), &key.payload];
        if request.replace {
            argv.push(b"REPLACE");
        }
        crate::replication::encode(&mut bytes, argv);
    }
    input.get_mut().write_all(&bytes).map_err(|_| (ioerr(true), Vec::new()))?;
    let mut first_error = None;
    for _ in 0..leading {
        match read_reply(&mut input) {
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Some(Ok(())) => {}
            None => return Err((ioerr(false), Vec::new())),
        }
    }
    let mut done = Vec::new();
    for key in keys {
        let mut reply = Some(Ok(()));
        for _ in 0..(1 + usize::from(asking)) {
            reply = match (reply, read_reply(&mut input)) {
                (Some(Ok(())), next) => next,
                (earlier, _) => earlier,
            };
        }
        match reply {
            Some(Ok(())) if first_error.is_none() => done.push(key.key.clone()),
            Some(Ok(())) => {}
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None if first_error.is_none() => return Err((ioerr(false), done)),
            None => break,
        }
    }
    match first_error {
        Some(e) => Err((Reply::Error(format!("ERR Target instance replied with error: {e}")), done)),
        None => Ok(done),
    }
}

/// One reply of the target: `Ok` for a status or integer, `Err(text)` for an error, `None`
/// when the connection failed.
fn read_reply(input: &mut BufReader<Dialed>) -> Option<Result<(), String>> {
    let mut line = String::new();
    if input.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let line = line.trim_end();
    match line.as_bytes().first() {
        Some(b'-') => Some(Err(line[1..].to_string())),
        Some(_) => Some(Ok(())),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn migrate_s_arguments_are_read_as_redis_reads_them() {
        let r = parse(&argv(&[
            "MIGRATE", "h", "7000", "", "2", "0", "COPY", "AUTH2", "u", "p", "KEYS", "a", "b",
        ]))
        .unwrap();
        assert_eq!(
            (r.port, r.db, r.timeout, r.copy, r.replace),
            (7000, 2, Duration::from_millis(1000), true, false)
        );
        assert_eq!(r.auth, Some((Some(Bytes::from("u")), Bytes::from("p"))));
        assert_eq!(r.keys, argv(&["a", "b"]));
        let error = |words: &[&str]| parse(&argv(words)).unwrap_err();
        assert_eq!(
            error(&["MIGRATE", "h", "1", "k", "0", "5", "AUTH"]),
            Reply::Error("ERR syntax error".into())
        );
        assert_eq!(
            error(&["MIGRATE", "h", "1", "k", "0", "5", "KEYS", "a"]),
            Reply::Error(
                "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string".into()
            )
        );
        assert_eq!(
            error(&["MIGRATE", "h", "1", "k", "x", "5"]),
            Reply::Error("ERR value is not an integer or out of range".into())
        );
    }
}
