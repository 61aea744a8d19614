//! A RESP2 server over the rediskv engine, for redis-cli, redis-benchmark and client libraries.
//!
//! ```text
//! cargo run --release -p rediskv-server -- [redis.conf] [--config FILE] [--port 6380] [--<parameter> value]…
//! redis-cli -p 6380
//! ```
//!
//! One event-loop thread (mio/epoll, [`conn`]) serves every connection, like redis-server;
//! each connection is a library `Session` (selected database, MULTI, WATCH) on the shared
//! `Engine` of its namespace (the default one, or its tenant's). Every complete request in
//! the input buffer is parsed and executed and all replies go out in one write, so
//! pipelining is cheap. Connection-level commands are answered by this crate ([`admin`],
//! [`config`], [`info`]); everything else goes to `Engine::execute`. What connections share
//! lives in [`state`].

mod admin;
mod config;
mod conn;
mod info;
mod resp;
mod state;

use std::sync::Arc;

use config::Config;

const USAGE: &str = "usage: rediskv-server [/path/to/redis.conf] [--config FILE] [--port 6380] [--bind 127.0.0.1] [--<parameter> <value>]...";

/// The configuration from the command line: a config file (first positional argument or
/// `--config`), then `--name value` pairs for any parameter, as redis-server takes them.
fn options() -> Result<Config, String> {
    let mut config = Config::new();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        std::process::exit(0);
    }
    let file = match args.first() {
        Some(first) if !first.starts_with('-') => Some(args.remove(0)),
        _ => match args.iter().position(|a| a == "--config") {
            Some(i) if i + 1 < args.len() => {
                let file = args.remove(i + 1);
                args.remove(i);
                Some(file)
            }
            Some(_) => return Err("--config needs a file".into()),
            None => None,
        },
    };
    if let Some(file) = file {
        config.load_file(std::path::Path::new(&file))?;
    }
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let name = match flag.as_str() {
            "-p" => "port".to_string(),
            "-b" => "bind".to_string(),
            f => f
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {f} ({USAGE})"))?
                .to_ascii_lowercase(),
        };
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        config.set_one(&name, &value, true).map_err(|e| format!("--{name} {value}: {e}"))?;
    }
    Ok(config)
}

fn main() {
    let config = options().unwrap_or_else(|e| {
        eprintln!("server: {e}");
        std::process::exit(2);
    });
    // `bind` may list several addresses; the first one is served.
    let bind = config.get("bind").split_whitespace().next().unwrap_or("127.0.0.1").to_string();
    let bind = if bind == "*" { "0.0.0.0".to_string() } else { bind };
    let port: u16 = config.get("port").parse().unwrap_or(6380);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(bind.as_str(), port))
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| {
            eprintln!("server: cannot resolve {bind}:{port}");
            std::process::exit(1);
        });
    let listener = mio::net::TcpListener::bind(addr).unwrap_or_else(|e| {
        eprintln!("server: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let mut config = config;
    if let Ok(local) = listener.local_addr() {
        // Port 0 asks for any free port: report the one we got.
        let _ = config.set_one("port", &local.port().to_string(), true);
        eprintln!("rediskv server listening on {local} (RESP2)");
    }
    let state = Arc::new(state::State::new(config));
    if let Err(e) = conn::Server::new(listener, state).and_then(conn::Server::run) {
        eprintln!("server: {e}");
        std::process::exit(1);
    }
}
