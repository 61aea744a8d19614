//! A RESP2 server over the rediskv engine, for redis-cli, redis-benchmark and client libraries.
//!
//! ```text
//! cargo run --release -p rediskv-server -- [--port 6380] [--bind 127.0.0.1]
//! redis-cli -p 6380
//! ```
//!
//! One event-loop thread (mio/epoll, [`conn`]) serves every connection and owns the
//! `Db<MemoryBackend>`, like redis-server; each connection remembers its own `SELECT`ed
//! database. Every complete request in the input buffer is parsed and executed and all
//! replies go out in one write, so pipelining is cheap. Connection-level commands are
//! answered by this crate ([`admin`], [`config`], [`info`]); everything else goes to
//! `Db::execute`.

mod admin;
mod config;
mod conn;
mod info;
mod resp;

struct Options {
    bind: String,
    port: u16,
}

fn options() -> Result<Options, String> {
    let mut opts = Options { bind: "127.0.0.1".into(), port: 6380 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" | "-p" => opts.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--bind" | "-b" => opts.bind = value()?,
            "--help" | "-h" => {
                println!("usage: rediskv-server [--port 6380] [--bind 127.0.0.1]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other} (try --help)")),
        }
    }
    Ok(opts)
}

fn main() {
    let opts = options().unwrap_or_else(|e| {
        eprintln!("server: {e}");
        std::process::exit(2);
    });
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(opts.bind.as_str(), opts.port))
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| {
            eprintln!("server: cannot resolve {}:{}", opts.bind, opts.port);
            std::process::exit(1);
        });
    let listener = mio::net::TcpListener::bind(addr).unwrap_or_else(|e| {
        eprintln!("server: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(opts.port);
    eprintln!("rediskv server listening on {}:{port} (RESP2)", opts.bind);
    if let Err(e) = conn::Server::new(listener, port).and_then(conn::Server::run) {
        eprintln!("server: {e}");
        std::process::exit(1);
    }
}
