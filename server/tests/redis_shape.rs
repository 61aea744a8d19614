//! The server answers like a real redis-server 7.0 in shape: INFO sections and field names,
//! `CONFIG GET *` names, CLIENT INFO fields, TIME, and the exact replies of a list of
//! connection-level commands (errors included). Values that differ by nature (pids, times,
//! memory) are not compared.

mod common;

use common::{Client, Server, Value, redis, rediskv, same_as_redis};

/// `# Section` titles and, for each, its field names.
fn info_shape(c: &mut Client, args: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut argv = vec!["INFO"];
    argv.extend_from_slice(args);
    let text = c.cmd(&argv).text();
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.split("\r\n") {
        if let Some(title) = line.strip_prefix("# ") {
            sections.push((title.to_string(), Vec::new()));
        } else if let Some((name, _)) = line.split_once(':') {
            sections.last_mut().expect("a field before any section").1.push(name.to_string());
        }
    }
    sections
}

fn client_info_fields(c: &mut Client) -> Vec<String> {
    c.cmd(&["CLIENT", "INFO"])
        .text()
        .split_whitespace()
        .map(|f| f.split('=').next().unwrap().to_string())
        .collect()
}

#[test]
fn shapes_match_redis() {
    let Some(redis) = redis(&[]) else { return };
    let ours = rediskv(&[]);
    let (mut r, mut o) = (redis.client(), ours.client());
    for c in [&mut r, &mut o] {
        assert_eq!(c.cmd(&["SET", "k", "v"]), Value::Status("OK".into()));
        assert_eq!(c.cmd(&["EXPIRE", "k", "100"]), Value::Int(1));
    }

    assert_eq!(info_shape(&mut o, &["cluster"]), info_shape(&mut r, &["cluster"]));
    let (theirs, mine) = (info_shape(&mut r, &[]), info_shape(&mut o, &[]));
    let titles = |s: &[(String, Vec<String>)]| s.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>();
    assert_eq!(titles(&mine), titles(&theirs));
    for ((title, their_fields), (_, my_fields)) in theirs.iter().zip(&mine) {
        if title == "Errorstats" || title == "Keyspace" {
            continue; // their contents depend on what ran
        }
        // Our additions (the crate's version, engine, threads, collector) are named
        // `rediskv_*`; everything else is Redis' fields in Redis' order.
        let (extensions, redis_fields): (Vec<String>, Vec<String>) =
            my_fields.iter().cloned().partition(|f| f.starts_with("rediskv_"));
        assert_eq!(&redis_fields, their_fields, "INFO {title}");
        match title.as_str() {
            "Server" => assert_eq!(
                extensions,
                ["rediskv_version", "rediskv_engine", "rediskv_dir", "rediskv_threads"]
            ),
            "Stats" => assert_eq!(
                extensions,
                [
                    "rediskv_expire_examined_keys",
                    "rediskv_gc_examined_records",
                    "rediskv_gc_collected_records",
                    "rediskv_gc_passes",
                    "rediskv_gc_position",
                    "rediskv_maintenance_leader"
                ]
            ),
            _ => assert!(extensions.is_empty(), "INFO {title}: {extensions:?}"),
        }
    }
    assert_eq!(info_shape(&mut o, &["keyspace"]), info_shape(&mut r, &["keyspace"]));
    let text = o.cmd(&["INFO", "keyspace"]).text();
    assert!(text.contains("db0:keys=1,expires=1,avg_ttl="), "{text}");
    for args in
        [&["server", "cluster"][..], &["everything"], &["all"], &["nosuchsection"], &["CPU", "memory"]]
    {
        assert_eq!(titles(&info_shape(&mut o, args)), titles(&info_shape(&mut r, args)), "INFO {args:?}");
    }

    let names = |c: &mut Client| {
        let mut n: Vec<String> = c.cmd(&["CONFIG", "GET", "*"]).texts().into_iter().step_by(2).collect();
        n.sort();
        n
    };
    assert_eq!(names(&mut o), names(&mut r));

    assert_eq!(client_info_fields(&mut o), client_info_fields(&mut r));

    for c in [&mut r, &mut o] {
        assert!(matches!(c.cmd(&["COMMAND", "COUNT"]), Value::Int(n) if n > 100));
        let time = c.cmd(&["TIME"]).texts();
        assert_eq!(time.len(), 2);
        let (secs, micros): (u64, u64) = (time[0].parse().unwrap(), time[1].parse().unwrap());
        assert!(secs > 1_600_000_000 && micros < 1_000_000, "{time:?}");
        assert!(matches!(c.cmd(&["LASTSAVE"]), Value::Int(t) if t as u64 <= secs));
    }
}

fn pairs(reply: Value) -> Vec<(String, String)> {
    let texts = reply.texts();
    let mut pairs: Vec<(String, String)> = texts.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    pairs.sort();
    pairs
}

#[test]
fn connection_commands_reply_exactly_like_redis() {
    let Some(redis) = redis(&[]) else { return };
    let ours = rediskv(&[]);
    let (mut r, mut o) = (redis.client(), ours.client());
    let script: &[&[&str]] = &[
        // SHUTDOWN with arguments it refuses: both servers must stay up.
        &["SHUTDOWN", "probe"],
        &["SHUTDOWN", "save", "nosave"],
        &["SHUTDOWN", "ABORT"],
        &["SHUTDOWN", "abort", "now"],
        &["CONFIG", "SET", "foo", "bar"],
        &["CONFIG", "SET", "timeout", "abc"],
        &["CONFIG", "SET", "timeout", "-1"],
        &["CONFIG", "SET", "timeout", "70", "maxmemory", "10mb"],
        &["CONFIG", "GET", "timeout", "maxmemory"],
        &["CONFIG", "SET", "timeout", "1", "timeout", "2"],
        &["CONFIG", "SET", "maxmemory", "abc"],
        &["CONFIG", "SET", "appendfsync", "bad"],
        &["CONFIG", "SET", "maxmemory-policy", "bad"],
        &["CONFIG", "SET", "port", "99999"],
        &["CONFIG", "SET", "databases", "3"],
        &["CONFIG", "SET", "dir", "/"],
        &["CONFIG", "SET", "proto-max-bulk-len", "10"],
        &["CONFIG", "SET", "proto-max-bulk-len", "2mb"],
        &["CONFIG", "GET", "proto-max-bulk-len"],
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        &["CONFIG", "GET", "notify-keyspace-events"],
        &["CONFIG", "SET", "notify-keyspace-events", "Q"],
        &["CONFIG", "SET", "activedefrag", "maybe"],
        &["CONFIG", "SET", "save", "100"],
        &["CONFIG", "SET", "hz", "abc"],
        &["CONFIG", "SET", "maxclients", "0"],
        &["CONFIG", "SET", "logfile", "x"],
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "maxmemory-clients",
            "200%",
            "client-query-buffer-limit",
            "x",
        ],
        &["CONFIG", "SET", "maxmemory-clients", "abc"],
        &["CONFIG", "SET", "maxmemory-clients", "-5%"],
        &["CONFIG", "SET", "maxmemory-clients", "10%"],
        &["CONFIG", "GET", "maxmemory-clients"],
        &["CONFIG", "SET", "maxmemory-clients", "1mb"],
        &["CONFIG", "GET", "maxmemory-clients"],
        &["CONFIG", "SET", "maxmemory-clients", "0"],
        &["CONFIG", "SET", "timeout", "0", "maxmemory", "0"],
        &["CONFIG", "REWRITE"],
        &["CONFIG", "RESETSTAT"],
        &["CONFIG"],
        &["CONFIG", "GET"],
        &["CONFIG", "SET", "timeout"],
        &["CONFIG", "SET", "timeout", "1", "bad"],
        &["CONFIG", "FOO"],
        &["CLIENT", "LIST", "TYPE", "foo"],
        &["CLIENT", "LIST", "ID", "1", "abc"],
        &["CLIENT", "LIST", "TYPE", "pubsub"],
        &["CLIENT", "LIST", "ID", "99999"],
        &["CLIENT", "REPLY", "foo"],
        &["CLIENT", "NO-EVICT", "x"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CLIENT", "PAUSE", "abc"],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "foo"],
        &["CLIENT", "UNPAUSE"],
        &["CLIENT", "INFO", "x"],
        &["CLIENT", "KILL"],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID", "99999"],
        &["CLIENT", "KILL", "foo", "bar"],
        &["CLIENT", "KILL", "USER", "nobody"],
        &["CLIENT", "KILL", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ADDR", "1.1.1.1:1", "LADDR", "1:1"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", "a b"],
        &["CLIENT", "SETNAME", "worker"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETINFO", "lib-name", "x"],
        &["CLIENT", "FOO"],
        &["TIME", "x"],
        &["LASTSAVE", "x"],
        &["ECHO"],
        &["ECHO", "a\r\nb"],
        &["RESET", "x"],
        &["DEBUG", "SLEEP", "0"],
        &["AUTH", "x"],
        &["AUTH", "a", "b"],
        &["AUTH", "default", "whatever"],
        &["HELLO", "2", "AUTH", "default"],
        &["HELLO", "4"],
        &["RESET"],
        &["CLIENT", "GETNAME"],
        &["SELECT", "16"],
        &["COMMAND", "INFO", "get", "hset", "zadd"],
        &["ROLE"],
        &["ROLE", "x"],
        &["LOLWUT"],
        &["LOLWUT", "VERSION", "x"],
        &["MODULE", "LIST"],
        &["MODULE", "LIST", "x"],
        &["MODULE", "FOO"],
        &["MODULE"],
        &["BGSAVE", "x"],
        &["BGREWRITEAOF", "x"],
        // A command refused before it is queued fails the whole transaction.
        &["MULTI"],
        &["SET", "a", "1"],
        &["NOSUCHCOMMAND", "x"],
        &["SET", "b", "2"],
        &["EXEC"],
        &["EXISTS", "a", "b"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["GET"],
        &["EXEC"],
        // FLUSHALL touches every watched key that exists, as FLUSHDB does.
        &["SET", "w", "1"],
        &["WATCH", "w", "never-set"],
        &["FLUSHALL"],
        &["MULTI"],
        &["PING"],
        &["EXEC"],
        &["WATCH", "never-set"],
        &["FLUSHALL"],
        &["MULTI"],
        &["PING"],
        &["EXEC"],
        // The command table's no-multi commands are refused in MULTI, and fail it.
        &["MULTI"],
        &["SAVE"],
        &["SHUTDOWN"],
        &["EXEC"],
    ];
    for cmd in script {
        let (mine, theirs) = (o.cmd(cmd), r.cmd(cmd));
        if cmd.len() > 2 && cmd[..2] == ["CONFIG", "GET"] {
            // Redis answers in the order of a hash table seeded at random: compare as maps.
            assert_eq!(pairs(mine), pairs(theirs), "{cmd:?}");
        } else {
            assert_eq!(mine, theirs, "{cmd:?}");
        }
    }
    // CLIENT REPLY OFF/SKIP: the held-back replies never arrive.
    for c in [&mut r, &mut o] {
        c.send(&[b"CLIENT", b"REPLY", b"SKIP"]);
        c.send(&[b"ECHO", b"skipped"]);
        c.send(&[b"CLIENT", b"REPLY", b"OFF"]);
        c.send(&[b"ECHO", b"off"]);
        c.send(&[b"CLIENT", b"REPLY", b"ON"]);
        c.send(&[b"ECHO", b"on"]);
        assert_eq!(c.read(), Value::Status("OK".into()));
        assert_eq!(c.read(), Value::Bulk(Some(b"on".to_vec())));
    }
}

#[test]
fn requirepass_replies_exactly_like_redis() {
    let Some(redis) = redis(&["--requirepass", "pw"]) else { return };
    let ours = rediskv(&["--requirepass", "pw"]);
    let (mut r, mut o) = (redis.client(), ours.client());
    let script: &[&[&str]] = &[
        &["GET", "a"],
        &["PING"],
        &["NOSUCH", "x\r\ny"],
        &["AUTH", "wrong"],
        &["AUTH", "default", "wrong"],
        &["HELLO"],
        &["HELLO", "2", "AUTH", "default", "wrong"],
        &["AUTH", "pw"],
        &["GET", "a"],
        &["AUTH", "foo", "pw"],
        &["RESET"],
        &["PING"],
        &["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "x"],
        &["CLIENT", "GETNAME"],
    ];
    for cmd in script {
        let (mine, theirs) = (o.cmd(cmd), r.cmd(cmd));
        if cmd[0] == "HELLO" && matches!(theirs, Value::Array(_)) {
            continue; // the id differs
        }
        assert_eq!(mine, theirs, "{cmd:?}");
    }
}

/// A SLOWLOG GET reply with what differs between two servers masked: entry ids, times,
/// durations and client addresses (arguments, their cuts and client names stay).
fn masked(reply: Value) -> Value {
    let Value::Array(Some(entries)) = reply else { return reply };
    let entry = |e: Value| match e {
        Value::Array(Some(mut f)) if f.len() == 6 => {
            f[0] = Value::Int(0);
            f[1] = Value::Int(0);
            f[2] = Value::Int(0);
            f[4] = Value::Bulk(Some(b"addr".to_vec()));
            Value::Array(Some(f))
        }
        other => other,
    };
    Value::Array(Some(entries.into_iter().map(entry).collect()))
}

fn slowlog_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let long = "x".repeat(130);
    let mut rpush = vec!["RPUSH".to_string(), "l".to_string()];
    rpush.extend((1..=40).map(|i| i.to_string()));
    let rpush: Vec<&str> = rpush.iter().map(String::as_str).collect();
    let script: &[&[&str]] = &[
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        &["SLOWLOG", "RESET"],
        &["SET", "k", "v"],
        &["CLIENT", "SETNAME", "bob"],
        &["AUTH", "foo", "bar"],
        &["SET", "a", &long],
        &rpush,
        &["GET", "k", "extra"],
        &["SLOWLOG", "LEN"],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "FOO"],
        &["SLOWLOG", "GET", "1", "2"],
        &["SLOWLOG", "LEN", "x"],
        &["SLOWLOG", "RESET", "x"],
        &["SLOWLOG"],
        &["SLOWLOG", "HELP"],
        &["SLOWLOG", "GET", "-1"],
        &["SLOWLOG", "GET", "3"],
        &["CONFIG", "SET", "slowlog-max-len", "2"],
        &["SLOWLOG", "GET"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
        &["SET", "k", "w"],
        &["SLOWLOG", "GET", "1"],
        &["SLOWLOG", "LEN"],
    ];
    script.iter().map(|cmd| masked(c.cmd(cmd))).collect()
}

/// SLOWLOG with every command logged, then with a shorter log and logging off: the entries
/// Redis 7.0 keeps (newest first, arguments cut to 32 and to 128 bytes, AUTH redacted, the
/// client's name, commands refused before running left out) and its subcommand errors.
#[test]
fn slowlog_matches_redis() {
    same_as_redis(slowlog_script);
}

/// A blocking command is logged when it is served (with the served client's name), not
/// when it blocks, and after the transaction that served it: what SLOWLOG holds after a
/// RESET queued with the LPUSH that serves a waiting BLPOP.
fn blocked_slowlog_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let mut waiter = server.client();
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    waiter.cmd(&["CLIENT", "SETNAME", "waiter"]);
    waiter.send(&[b"BLPOP", b"l", b"0"]);
    // Until the server counts it blocked (bounded: the test fails rather than hang).
    let blocked = (0..500).any(|_| {
        let Value::Bulk(Some(info)) = c.cmd(&["INFO", "clients"]) else { return false };
        let found = String::from_utf8_lossy(&info).contains("blocked_clients:1");
        if !found {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        found
    });
    assert!(blocked, "BLPOP never blocked");
    // SLOWLOG RESET queued in the transaction: the served BLPOP comes after it, as in Redis
    // (which serves the clients a transaction unblocks once it is over).
    let mut out = vec![c.cmd(&["MULTI"]), c.cmd(&["LPUSH", "l", "foo"]), c.cmd(&["SLOWLOG", "RESET"])];
    out.push(c.cmd(&["EXEC"]));
    out.push(waiter.read());
    out.push(masked(c.cmd(&["SLOWLOG", "GET"])));
    c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
    out
}

#[test]
fn a_served_blocking_command_is_in_the_slowlog_as_in_redis() {
    same_as_redis(blocked_slowlog_script);
}

/// What a MONITOR client received while another client ran `script`, up to `ECHO done`, with
/// each line's time and client address masked (the database stays).
fn monitor_script(server: &Server) -> Vec<Value> {
    let mut monitor = server.client();
    let mut out = vec![monitor.cmd(&["MONITOR"])];
    let mut c = server.client();
    let script: &[&[&str]] = &[
        &["SET", "k", "a b\"c"],
        &["GET", "k", "extra"],
        &["NOSUCH", "a"],
        &["AUTH", "foo"],
        &["CONFIG", "SET", "timeout", "0"],
        &["SELECT", "2"],
        &["SET", "x", "1"],
        &["SELECT", "0"],
        &["MULTI"],
        &["SET", "m", "1"],
        &["INCR", "m"],
        &["EXEC"],
        &["SET", "bin", "a\u{1}\tb\\"],
        &["BLPOP", "nolist", "0.01"],
        &["CLIENT", "LIST"],
        &["SLOWLOG", "LEN"],
        &["INFO", "server"],
        &["EVAL", "redis.call('set',KEYS[1],ARGV[1]) return redis.call('get',KEYS[1])", "1", "foo", "bar"],
        &[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=mon\nredis.register_function('mon', function() return redis.call('ping') end)",
        ],
        &["FCALL", "mon", "0"],
        &["PING"],
        &["ECHO", "done"],
    ];
    for cmd in script {
        c.cmd(cmd);
    }
    loop {
        let Value::Status(line) = monitor.read() else { panic!("a monitor line is a status") };
        let (time, rest) = line.split_once(" [").expect("time, then [db addr]");
        let (db_addr, args) = rest.split_once("] ").expect("[db addr] args");
        assert!(time.len() == 17 && time.as_bytes()[10] == b'.', "{line}");
        let db = db_addr.split(' ').next().unwrap_or_default();
        let lua = if db_addr.ends_with(" lua") { " lua" } else { "" };
        out.push(Value::Status(format!("[{db}{lua}] {args}")));
        if args == "\"ECHO\" \"done\"" {
            return out;
        }
    }
}

/// MONITOR shows what Redis 7.0 shows, quoted and redacted as it does: not admin commands
/// nor commands refused before running, MULTI's commands when EXEC runs them, each with the
/// client's database.
#[test]
fn monitor_matches_redis() {
    same_as_redis(monitor_script);
}

/// EXEC refuses a transaction holding a command that may use memory once `maxmemory` is
/// exceeded, even if the commands were queued before (EXECABORT … OOM), and discards it.
fn exec_oom_script(server: &Server) -> Vec<Value> {
    let (mut c, mut admin) = (server.client(), server.client());
    let mut out = vec![c.cmd(&["SET", "filler", &"x".repeat(1000)])];
    for cmd in [&["MULTI"][..], &["SET", "x", "1"], &["GET", "x"]] {
        out.push(c.cmd(cmd));
    }
    out.push(admin.cmd(&["CONFIG", "SET", "maxmemory", "1"]));
    out.push(c.cmd(&["EXEC"]));
    out.push(c.cmd(&["EXEC"]));
    for cmd in [&["MULTI"][..], &["GET", "x"], &["EXEC"]] {
        out.push(c.cmd(cmd));
    }
    out.push(admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]));
    // SAVE and SHUTDOWN are refused inside MULTI, and the transaction with them.
    for cmd in [
        &["MULTI"][..],
        &["SET", "foo", "bar"],
        &["SHUTDOWN"],
        &["EXEC"],
        &["MULTI"],
        &["SAVE"],
        &["DISCARD"],
    ] {
        out.push(c.cmd(cmd));
    }
    out.push(c.cmd(&["GET", "foo"]));
    out
}

#[test]
fn exec_checks_memory_like_redis() {
    same_as_redis(exec_oom_script);
}

/// Which writes abort a WATCH on their key: Redis signals a stream's own changes (XADD,
/// XDEL, XTRIM, MKSTREAM) but not its consumer groups' (XGROUP, XSETID, XACK, XCLAIM,
/// XAUTOCLAIM, XREADGROUP), nor PFDEBUG's conversion to dense.
fn watch_script(server: &Server) -> Vec<Value> {
    let mut c = server.client();
    let setup: &[&[&str]] = &[
        &["DEL", "s", "h"],
        &["XADD", "s", "1-1", "f", "v"],
        &["XADD", "s", "2-1", "f", "v"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", ">"],
        &["PFADD", "h", "a"],
    ];
    let between: &[&[&str]] = &[
        &["XGROUP", "CREATE", "s", "g2", "$"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["XGROUP", "SETID", "s", "g", "0"],
        &["XGROUP", "DESTROY", "s", "g"],
        &["XGROUP", "CREATECONSUMER", "s", "g", "c9"],
        &["XGROUP", "DELCONSUMER", "s", "g", "c1"],
        &["XSETID", "s", "5-0"],
        &["XACK", "s", "g", "1-1"],
        &["XCLAIM", "s", "g", "c2", "0", "1-1"],
        &["XAUTOCLAIM", "s", "g", "c2", "0", "0"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"],
        &["XADD", "s", "3-1", "f", "v"],
        &["XDEL", "s", "1-1"],
        &["XTRIM", "s", "MAXLEN", "0"],
        &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
        &["PFDEBUG", "TODENSE", "h"],
        &["PFADD", "h", "b"],
    ];
    let mut seen = Vec::new();
    for cmd in between {
        for s in setup {
            c.cmd(s);
        }
        c.cmd(&["DEL", "new"]);
        let key = cmd[1..].iter().find(|a| ["s", "h", "new"].contains(a)).expect("a key");
        c.cmd(&["WATCH", key]);
        seen.push(c.cmd(cmd));
        c.cmd(&["MULTI"]);
        c.cmd(&["PING"]);
        seen.push(c.cmd(&["EXEC"]));
    }
    seen
}

#[test]
fn watch_sees_the_writes_redis_signals() {
    same_as_redis(watch_script);
}
