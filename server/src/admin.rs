//! Connection-level commands about the client itself: HELLO, CLIENT, COMMAND.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rediskv::commands::Reply;
use rediskv::commands::args::parse_i64;

static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

/// What the server knows about one connected client.
pub struct Client {
    /// CLIENT ID: unique, increasing from 1.
    pub id: u64,
    /// The database this client has SELECTed.
    pub index: usize,
    /// CLIENT SETNAME.
    pub name: Option<Bytes>,
}

impl Client {
    /// A fresh client with the next id, on database 0, without a name.
    pub fn new() -> Self {
        Client { id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed), index: 0, name: None }
    }

    /// HELLO [protover [AUTH user pass] [SETNAME name]]: the server's map as a flat array.
    pub fn hello(&mut self, argv: &[Bytes]) -> Reply {
        if let Some(ver) = argv.get(1) {
            match parse_i64(ver) {
                None => return Reply::Error("ERR Protocol version is not an integer or out of range".into()),
                Some(2) => {}
                Some(_) => return Reply::Error("NOPROTO unsupported protocol version".into()),
            }
            let mut i = 2;
            while i < argv.len() {
                let opt = &argv[i];
                if opt.eq_ignore_ascii_case(b"setname") && i + 1 < argv.len() {
                    if let Err(e) = self.set_name(&argv[i + 1]) {
                        return e;
                    }
                    i += 2;
                } else if opt.eq_ignore_ascii_case(b"auth") && i + 2 < argv.len() {
                    i += 3;
                } else {
                    return Reply::Error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(opt)
                    ));
                }
            }
        }
        let pairs: [(&str, Reply); 7] = [
            ("server", Reply::bulk(b"redis")),
            ("version", Reply::bulk(b"7.0.15")),
            ("proto", Reply::Integer(2)),
            ("id", Reply::Integer(self.id as i64)),
            ("mode", Reply::bulk(b"standalone")),
            ("role", Reply::bulk(b"master")),
            ("modules", Reply::Array(Vec::new())),
        ];
        Reply::Array(pairs.into_iter().flat_map(|(k, v)| [Reply::bulk(k.as_bytes()), v]).collect())
    }

    fn set_name(&mut self, name: &Bytes) -> Result<(), Reply> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(Reply::Error(
                "ERR Client names cannot contain spaces, newlines or special characters.".into(),
            ));
        }
        self.name = if name.is_empty() { None } else { Some(name.clone()) };
        Ok(())
    }

    /// CLIENT SETNAME/GETNAME/ID/SETINFO/INFO.
    pub fn client(&mut self, argv: &[Bytes]) -> Reply {
        let Some(sub) = argv.get(1) else {
            return Reply::Error("ERR wrong number of arguments for 'client' command".into());
        };
        let sub_is = |s: &str| sub.eq_ignore_ascii_case(s.as_bytes());
        match argv.len() {
            3 if sub_is("setname") => match self.set_name(&argv[2]) {
                Ok(()) => Reply::OK,
                Err(e) => e,
            },
            2 if sub_is("getname") => Reply::bulk_or_nil(self.name.clone()),
            2 if sub_is("id") => Reply::Integer(self.id as i64),
            4 if sub_is("setinfo") => Reply::OK,
            2 if sub_is("info") => Reply::Bulk(Bytes::from(format!(
                "id={} name={} db={} resp=2\n",
                self.id,
                self.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
                self.index
            ))),
            _ if ["setname", "getname", "id", "setinfo", "info"].iter().any(|s| sub_is(s)) => {
                Reply::Error(format!(
                    "ERR wrong number of arguments for 'client|{}' command",
                    sub.to_ascii_lowercase().escape_ascii()
                ))
            }
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(sub)
            )),
        }
    }
}

/// COMMAND: no per-command documentation is served; clients fall back gracefully.
pub fn command(argv: &[Bytes]) -> Reply {
    match argv.get(1) {
        None => Reply::Array(Vec::new()),
        Some(sub) if sub.eq_ignore_ascii_case(b"count") => Reply::Integer(0),
        Some(sub) if sub.eq_ignore_ascii_case(b"docs") || sub.eq_ignore_ascii_case(b"info") => {
            Reply::Array(Vec::new())
        }
        Some(sub) => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}
