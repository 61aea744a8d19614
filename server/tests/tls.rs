//! TLS: `tls-port` served by the event loops, checked with redis-cli, redis-benchmark and
//! redis-py's SSL client (the redis-tools package and `pip install redis`: a loud skip
//! without them, a failure under `CI=true`), and with the server's own client half
//! (`src/tls.rs`, compiled in here). The certificates are made by each test: a CA, a server
//! certificate, a client certificate, and a client certificate of another CA.

#[path = "common/certs.rs"]
mod certs;
mod common;
#[allow(dead_code)]
#[path = "../src/sync.rs"]
mod sync;
#[allow(dead_code)]
#[path = "../src/tls.rs"]
mod tls;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use certs::Certs;
use common::Value;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// Parameters for the client half: the CA, and `client`'s certificate (None: the
/// server's own, as `tls-client-cert-file` unset).
fn client_params(certs: &Certs, client: Option<&str>) -> Params {
    let mut params = Params::default();
    params.set("tls-ca-cert-file", &certs.path("ca.crt"));
    params.set("tls-cert-file", &certs.path("server.crt"));
    params.set("tls-key-file", &certs.path("server.key"));
    params.set("tls-auth-clients", "yes");
    params.set("tls-session-caching", "yes");
    if let Some(name) = client {
        params.set("tls-client-cert-file", &certs.path(&format!("{name}.crt")));
        params.set("tls-client-key-file", &certs.path(&format!("{name}.key")));
    }
    params
}

/// `tls-*` parameters by name, as the server's configuration gives them to `tls.rs`.
#[derive(Default, Clone)]
struct Params(HashMap<String, String>);

impl Params {
    fn set(&mut self, name: &str, value: &str) {
        self.0.insert(name.to_string(), value.to_string());
    }
}

impl tls::Params for Params {
    fn param(&self, name: &str) -> &str {
        self.0.get(name).map_or("", String::as_str)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// rediskv-server serving TLS on a free port with `certs`, and `extra` arguments (no
/// plaintext port unless they give one); the server and its TLS port.
fn start(certs: &Certs, extra: &[&str]) -> (common::Server, u16) {
    let port = free_port();
    let args = certs.server_args(port);
    let args: Vec<&str> = args.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    (common::rediskv(&args), port)
}

/// Dials `port` with the client half and `params`.
fn dial(port: u16, params: &Params) -> std::io::Result<tls::TlsStream> {
    let contexts = tls::Tls::default();
    contexts.configure(params).map_err(std::io::Error::other)?;
    let config = contexts.client().expect("a client context with a CA");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    tls::connect(addr, "localhost", config, Duration::from_secs(10))
}

/// Sends one command and reads its reply.
fn command(stream: &mut impl ReadWrite, args: &[&str]) -> std::io::Result<Value> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    read_value(stream)
}

/// One RESP2 reply.
fn read_value(stream: &mut impl Read) -> std::io::Result<Value> {
    let line = read_line(stream)?;
    let (kind, rest) = line.split_at(1);
    Ok(match (kind, rest) {
        ("+", _) => Value::Status(rest.to_string()),
        ("-", _) => Value::Error(rest.to_string()),
        (":", _) => Value::Int(rest.parse().unwrap()),
        ("$", "-1") => Value::Bulk(None),
        ("$", _) => {
            let mut bulk = vec![0; rest.parse::<usize>().unwrap() + 2];
            stream.read_exact(&mut bulk)?;
            bulk.truncate(bulk.len() - 2);
            Value::Bulk(Some(bulk))
        }
        ("*", _) => Value::Array(Some(
            (0..rest.parse::<usize>().unwrap()).map(|_| read_value(stream)).collect::<Result<_, _>>()?,
        )),
        _ => panic!("unexpected reply {line:?}"),
    })
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn read_line(stream: &mut impl Read) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0];
    while !line.ends_with(b"\r\n") {
        stream.read_exact(&mut byte)?;
        line.push(byte[0]);
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn has(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        common::missing_tool(&common::test_name(), tool, "apt-get install redis-tools");
    }
    found
}

/// redis-cli over TLS to `port`, with the CA and, when `client` names one, that certificate.
fn cli(certs: &Certs, port: u16, client: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-p", &port.to_string(), "--tls", "--cacert", &certs.path("ca.crt")]);
    if let Some(name) = client {
        cmd.args([
            "--cert",
            &certs.path(&format!("{name}.crt")),
            "--key",
            &certs.path(&format!("{name}.key")),
        ]);
    }
    cmd.args(args).output().expect("run redis-cli")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// redis-cli and redis-benchmark over TLS: PING, a SET/GET round trip, a large value, and a
/// pipelined load whose keys then read back.
#[test]
fn redis_cli_and_redis_benchmark_over_tls() {
    if !has("redis-cli") || !has("redis-benchmark") {
        return;
    }
    let certs = Certs::new();
    let (_server, port) = start(&certs, &["--threads", "2"]);
    assert_eq!(stdout(&cli(&certs, port, Some("client"), &["PING"])), "PONG");
    assert_eq!(stdout(&cli(&certs, port, Some("client"), &["SET", "greeting", "hello over tls"])), "OK");
    assert_eq!(stdout(&cli(&certs, port, Some("client"), &["GET", "greeting"])), "hello over tls");
    // A value of many TLS records each way.
    let big = "v".repeat(1 << 20);
    let mut tls = dial(port, &client_params(&certs, Some("client"))).unwrap();
    assert_eq!(command(&mut tls, &["SET", "big", &big]).unwrap(), Value::Status("OK".into()));
    assert_eq!(command(&mut tls, &["GET", "big"]).unwrap(), Value::Bulk(Some(big.into_bytes())));

    let bench = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "--tls", "--cacert", &certs.path("ca.crt")])
        .args(["--cert", &certs.path("client.crt"), "--key", &certs.path("client.key")])
        .args(["-n", "4000", "-c", "4", "-P", "32", "-r", "1000", "-t", "set,get", "-q"])
        .output()
        .expect("run redis-benchmark");
    let text = stdout(&bench);
    assert!(bench.status.success(), "{text}{}", String::from_utf8_lossy(&bench.stderr));
    let finished = text.split(['\r', '\n']).filter(|l| l.contains("requests per second")).count();
    assert_eq!(finished, 2, "both tests ran to their end: {text}");
    let keys = cli(&certs, port, Some("client"), &["DBSIZE"]);
    let keys: u64 = stdout(&keys).parse().unwrap();
    assert!(keys > 500, "the pipelined SETs were stored: {keys} keys");
}

/// `tls-auth-clients yes` refuses a client without a certificate and one whose certificate
/// another CA signed; `optional` takes one without, still not a stranger's; `no` asks for
/// none. A refusal closes only that connection.
#[test]
fn client_certificates_as_tls_auth_clients_says() {
    if !has("redis-cli") {
        return;
    }
    let certs = Certs::new();
    let (_server, port) = start(&certs, &["--threads", "1"]);
    let mut admin = dial(port, &client_params(&certs, Some("client"))).unwrap();
    let refused = |client: Option<&str>| {
        let out = cli(&certs, port, client, &["PING"]);
        !stdout(&out).contains("PONG")
    };
    assert!(refused(None), "no certificate, tls-auth-clients yes");
    assert!(refused(Some("stranger")), "another CA's certificate");
    assert!(!refused(Some("client")));
    assert_eq!(command(&mut admin, &["PING"]).unwrap(), Value::Status("PONG".into()), "the others stay");

    let set = |admin: &mut tls::TlsStream, value: &str| {
        command(admin, &["CONFIG", "SET", "tls-auth-clients", value]).unwrap()
    };
    assert_eq!(set(&mut admin, "optional"), Value::Status("OK".into()));
    assert!(!refused(None), "optional: no certificate is fine");
    assert!(!refused(Some("client")));
    assert!(refused(Some("stranger")), "optional: a certificate sent is checked");
    assert_eq!(set(&mut admin, "no"), Value::Status("OK".into()));
    assert!(!refused(None));
    assert_eq!(
        set(&mut admin, "maybe"),
        Value::Error("ERR CONFIG SET failed (possibly related to argument 'tls-auth-clients') - argument(s) must be one of the following: no, yes, optional".into())
    );
    assert_eq!(set(&mut admin, "yes"), Value::Status("OK".into()));
    assert!(refused(None));
}

/// A plaintext client on the TLS port, a client that stalls in its handshake and one that
/// sends garbage are each closed or left waiting alone: with one event loop, TLS clients
/// and the plaintext port go on being served.
#[test]
fn a_failing_handshake_closes_only_its_connection() {
    let certs = Certs::new();
    let plain_port = free_port().to_string();
    let (server, port) = start(&certs, &["--threads", "1", "--port", &plain_port]);
    assert_eq!(server.port.to_string(), plain_port);
    let params = client_params(&certs, Some("client"));
    let mut before = dial(port, &params).unwrap();

    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap(); // half a ClientHello
    let mut plaintext = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plaintext.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    plaintext.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut answer = Vec::new();
    plaintext.read_to_end(&mut answer).expect("closed by the server");
    assert!(!answer.windows(5).any(|w| w == b"+PONG"), "{answer:?}");
    assert_eq!(answer.first(), Some(&0x15), "a TLS alert, then the end: {answer:?}");

    assert_eq!(command(&mut before, &["PING"]).unwrap(), Value::Status("PONG".into()));
    let mut after = dial(port, &params).unwrap();
    assert_eq!(command(&mut after, &["SET", "k", "v"]).unwrap(), Value::Status("OK".into()));
    let mut plain = common::Client::connect(plain_port.parse().unwrap());
    assert_eq!(plain.cmd(&["GET", "k"]), Value::Bulk(Some(b"v".to_vec())), "the plaintext port serves too");
    drop(stalled);
}

/// The client half for the links the server dials (to a server whose CA comes from
/// `tls-ca-cert-dir`): it presents `tls-client-cert-file`, or the server's own certificate
/// when that is unset; it checks the peer's certificate against
/// the CA and not the name dialed, as Redis; it follows `tls-protocols`.
#[test]
fn the_client_half_dials_a_tls_peer() {
    let certs = Certs::new();
    // The server's CA from a directory (tls-ca-cert-dir) rather than a file.
    let cas = certs.dir.join("cas");
    std::fs::create_dir(&cas).unwrap();
    std::fs::copy(certs.path("ca.crt"), cas.join("ca.pem")).unwrap();
    let (_server, port) =
        start(&certs, &["--tls-ca-cert-file", "", "--tls-ca-cert-dir", cas.to_str().unwrap()]);
    for client in [Some("client"), None] {
        let mut stream = dial(port, &client_params(&certs, client)).unwrap();
        assert_eq!(command(&mut stream, &["PING"]).unwrap(), Value::Status("PONG".into()), "{client:?}");
    }
    let mut stranger = dial(port, &client_params(&certs, Some("stranger"))).unwrap();
    assert!(command(&mut stranger, &["PING"]).is_err(), "another CA's certificate is refused");
    let params = client_params(&certs, Some("client"));
    let contexts = tls::Tls::default();
    contexts.configure(&params).unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut other_name =
        tls::connect(addr, "replica.example", contexts.client().unwrap(), Duration::from_secs(10)).unwrap();
    assert_eq!(command(&mut other_name, &["PING"]).unwrap(), Value::Status("PONG".into()));

    let mut untrusting = params.clone();
    untrusting.set("tls-ca-cert-file", &certs.path("other-ca.crt"));
    let err = dial(port, &untrusting).expect_err("the server's CA is not this one");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    let mut tls13 = params.clone();
    tls13.set("tls-protocols", "TLSv1.3");
    let mut admin = dial(port, &tls13).unwrap();
    assert_eq!(admin.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    assert_eq!(
        command(&mut admin, &["CONFIG", "SET", "tls-protocols", "TLSv1.2"]).unwrap(),
        Value::Status("OK".into())
    );
    assert!(dial(port, &tls13).is_err(), "the server speaks TLS 1.2 only now");
    let tls12 = dial(port, &params).unwrap();
    assert_eq!(tls12.conn.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_2));
}

/// `tls-session-caching yes` (the default) lets a client resume its session; `no` makes
/// every handshake a full one.
#[test]
fn sessions_resume_as_tls_session_caching_says() {
    let certs = Certs::new();
    let (_server, port) = start(&certs, &[]);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let contexts = tls::Tls::default();
    contexts.configure(&client_params(&certs, Some("client"))).unwrap();
    // Two connections of one client context, each reading a reply (and so the session
    // tickets sent before it).
    let kinds = || {
        let config = contexts.client().unwrap();
        [0, 1].map(|_| {
            let mut stream =
                tls::connect(addr, "localhost", config.clone(), Duration::from_secs(10)).unwrap();
            assert_eq!(command(&mut stream, &["PING"]).unwrap(), Value::Status("PONG".into()));
            stream.conn.handshake_kind().unwrap()
        })
    };
    use rustls::HandshakeKind::{Full, Resumed};
    assert_eq!(kinds(), [Full, Resumed]);
    let mut admin = dial(port, &client_params(&certs, Some("client"))).unwrap();
    let set = command(&mut admin, &["CONFIG", "SET", "tls-session-caching", "no"]).unwrap();
    assert_eq!(set, Value::Status("OK".into()));
    contexts.configure(&client_params(&certs, Some("client"))).unwrap();
    assert_eq!(kinds(), [Full, Full]);
}

/// `tls-prefer-server-ciphers`: with `no` the client's order of suites wins, with `yes` the
/// order of `tls-ciphersuites` (Redis' test of it, in TLS 1.3's suites).
#[test]
fn prefer_server_ciphers_chooses_whose_order_wins() {
    let certs = Certs::new();
    let (_server, port) =
        start(&certs, &["--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384"]);
    let params = client_params(&certs, Some("client"));
    // rustls' client prefers AES-256-GCM to ChaCha20-Poly1305.
    let suite = || {
        let stream = dial(port, &params).unwrap();
        format!("{:?}", stream.conn.negotiated_cipher_suite().unwrap().suite())
    };
    assert_eq!(suite(), "TLS13_AES_256_GCM_SHA384");
    let mut admin = dial(port, &params).unwrap();
    let set = command(&mut admin, &["CONFIG", "SET", "tls-prefer-server-ciphers", "yes"]).unwrap();
    assert_eq!(set, Value::Status("OK".into()));
    assert_eq!(suite(), "TLS13_CHACHA20_POLY1305_SHA256");
}

/// CONFIG SET of the tls-* parameters as Redis: a context that cannot be made is refused
/// whole (the old one serves on), a new certificate is served to the next connections, and
/// `port`/`tls-port` open and close their listeners, so a port can pass from one to the
/// other (Redis' "switch between tcp and tls ports").
#[test]
fn config_set_reloads_and_moves_the_listeners() {
    let certs = Certs::new();
    let (_server, port) = start(&certs, &[]);
    let params = client_params(&certs, Some("client"));
    let mut admin = dial(port, &params).unwrap();
    let mut config = |args: &[&str]| {
        let mut argv = vec!["CONFIG"];
        argv.extend_from_slice(args);
        command(&mut admin, &argv).unwrap()
    };
    assert_eq!(config(&["GET", "tls-port"]).texts(), ["tls-port", &port.to_string()]);
    let unable = |name: &str| {
        Value::Error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs."
        ))
    };
    assert_eq!(config(&["SET", "tls-cert-file", "/nonexistent.crt"]), unable("tls-cert-file"));
    assert_eq!(config(&["SET", "tls-protocols", "TLSv1.2 SSLv3"]), unable("tls-protocols"));
    assert_eq!(config(&["SET", "tls-ciphersuites", "TLS_NOPE"]), unable("tls-ciphersuites"));
    assert_eq!(
        config(&["SET", "tls-ca-cert-file", "", "tls-ca-cert-dir", ""]),
        unable("tls-ca-cert-file"),
        "tls-auth-clients yes needs a CA"
    );
    assert_eq!(config(&["GET", "tls-cert-file"]).texts(), ["tls-cert-file", &certs.path("server.crt")]);

    let served = |params: &Params| -> Vec<u8> {
        let stream = dial(port, params).unwrap();
        stream.conn.peer_certificates().unwrap()[0].to_vec()
    };
    let pem = |name: &str| CertificateDer::from_pem_file(certs.path(name)).unwrap().to_vec();
    assert_eq!(served(&params), pem("server.crt"));
    assert_eq!(
        config(&[
            "SET",
            "tls-cert-file",
            &certs.path("server2.crt"),
            "tls-key-file",
            &certs.path("server2.key")
        ]),
        Value::Status("OK".into())
    );
    assert_eq!(served(&params), pem("server2.crt"), "the next connections get the new certificate");
    // An encrypted key, as Redis' "Working with an encrypted keyfile".
    let encrypted = certs.path("server2.enc.key");
    assert_eq!(config(&["SET", "tls-key-file", &encrypted]), unable("tls-key-file"), "no password");
    assert_eq!(config(&["SET", "tls-key-file-pass", "wrong"]), Value::Status("OK".into()));
    assert_eq!(config(&["SET", "tls-key-file", &encrypted]), unable("tls-key-file"), "a wrong password");
    assert_eq!(config(&["SET", "tls-key-file-pass", "1234"]), Value::Status("OK".into()));
    assert_eq!(config(&["SET", "tls-key-file", &encrypted]), Value::Status("OK".into()));
    assert_eq!(served(&params), pem("server2.crt"));
    // A new certificate with a port that cannot be had: neither is applied.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().port().to_string();
    let (cert, key) = (certs.path("server.crt"), certs.path("server.key"));
    assert_eq!(
        config(&["SET", "tls-cert-file", &cert, "tls-key-file", &key, "tls-port", &busy]),
        Value::Error("ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs.".into())
    );
    assert_eq!(config(&["GET", "tls-cert-file"]).texts(), ["tls-cert-file", &certs.path("server2.crt")]);
    assert_eq!(served(&params), pem("server2.crt"), "the certificate of before");
    // As Redis, the first change to fail in the order of the arguments is named.
    assert_eq!(
        config(&["SET", "tls-port", &busy, "tls-cert-file", "/nonexistent.crt"]),
        Value::Error("ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs.".into())
    );
    assert_eq!(
        config(&["SET", "tls-cert-file", "/nonexistent.crt", "tls-port", &busy]),
        unable("tls-cert-file")
    );
    // A certificate renewed in place is read by setting its file to the same name.
    let renewed = pem("server.crt");
    assert_ne!(served(&params), renewed);
    std::fs::copy(certs.path("server.crt"), certs.path("server2.crt")).unwrap();
    certs.encrypt("server.key", "server2.enc.key", "1234");
    assert_ne!(served(&params), renewed, "read only when set");
    let (cert2, key2) = (certs.path("server2.crt"), certs.path("server2.enc.key"));
    assert_eq!(config(&["SET", "tls-cert-file", &cert2, "tls-key-file", &key2]), Value::Status("OK".into()));
    assert_eq!(served(&params), renewed);

    // TLS to plaintext and back on one port.
    assert_eq!(config(&["SET", "tls-port", "0"]), Value::Status("OK".into()));
    assert!(dial(port, &params).is_err(), "the TLS listener is closed");
    assert_eq!(config(&["SET", "port", &port.to_string()]), Value::Status("OK".into()));
    let mut plain = common::Client::connect(port);
    assert_eq!(plain.cmd(&["PING"]), Value::Status("PONG".into()));
    assert_eq!(plain.cmd(&["CONFIG", "SET", "port", "0"]), Value::Status("OK".into()));
    assert_eq!(plain.cmd(&["CONFIG", "SET", "tls-port", &port.to_string()]), Value::Status("OK".into()));
    let mut again = dial(port, &params).unwrap();
    let info = command(&mut again, &["INFO", "server"]).unwrap().text();
    assert!(info.contains(&format!("tcp_port:{port}\r\n")), "the TLS port when there is no other: {info}");
}

/// redis-py's SSL client (`ssl=True` with the CA and a client certificate) runs the smoke
/// script over TLS, in RESP2 and RESP3.
#[test]
fn redis_py_over_tls() {
    let has_redis_py =
        Command::new("python3").args(["-c", "import redis"]).status().is_ok_and(|s| s.success());
    if !has_redis_py {
        common::missing_tool(&common::test_name(), "python3 -c 'import redis'", "pip install redis");
        return;
    }
    let certs = Certs::new();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redis_py_smoke.py");
    for protocol in ["2", "3"] {
        let (_server, port) = start(&certs, &[]);
        let out = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(protocol)
            .env("REDISKV_TLS_DIR", Path::new(&certs.dir))
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "redis-py over TLS failed (RESP{protocol}):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A replica with `tls-replication yes` dials its primary's TLS port (its own certificate as
/// the client's, checked by the primary under `tls-auth-clients yes`) and follows its writes.
#[test]
fn a_replica_follows_its_primary_over_tls() {
    let certs = Certs::new();
    let (primary, port) = start(&certs, &["--threads", "1"]);
    let mut writer = dial(port, &client_params(&certs, Some("client"))).unwrap();
    let replicaof = format!("127.0.0.1 {port}");
    let replica = common::rediskv(&[
        "--tls-cert-file",
        &certs.path("server.crt"),
        "--tls-key-file",
        &certs.path("server.key"),
        "--tls-ca-cert-file",
        &certs.path("ca.crt"),
        "--tls-replication",
        "yes",
        "--replicaof",
        &replicaof,
    ]);
    let mut reader = replica.client();
    for i in 0..50 {
        writer.write_all(format!("*3\r\n$3\r\nSET\r\n$3\r\nk{i:02}\r\n$2\r\n{i:02}\r\n").as_bytes()).unwrap();
    }
    let mut replies = vec![0u8; 5 * 50];
    writer.read_exact(&mut replies).unwrap();
    assert_eq!(replies, b"+OK\r\n".repeat(50));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while reader.cmd(&["GET", "k49"]) != Value::Bulk(Some(b"49".to_vec())) {
        assert!(std::time::Instant::now() < deadline, "the replica did not follow over TLS");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(reader.cmd(&["DBSIZE"]), Value::Int(50));
    // Read-only, as any replica; and the primary counts it as a replica of its TLS port.
    assert!(matches!(reader.cmd(&["SET", "x", "1"]), Value::Error(e) if e.starts_with("READONLY")));
    drop(primary);
}
