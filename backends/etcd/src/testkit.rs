//! A real etcd cluster for tests (this crate's, and the server's over it): members on free
//! loopback ports, data in a temp dir, all killed when dropped. Without `etcd` on the PATH a
//! test skips loudly, or fails when `CI=true`. Test support: it panics on failure.

#[path = "../../../tests/support/missing_tool.rs"]
mod missing_tool;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Backend, Options, Tls};
use rediskv::{ColumnFamily, KvBackend};
use rediskv_engine::testkit::TempDir;

/// Limits the test clusters are started with (a 10,000-field HSET fits).
pub const MAX_TXN_OPS: usize = 100_000;
/// `--max-request-bytes` of the test clusters.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

struct Member {
    name: String,
    client: u16,
    peer: u16,
    child: Option<Child>,
}

/// Running etcd members forming one cluster.
pub struct Cluster {
    dir: TempDir,
    members: Vec<Member>,
    initial: String,
    extra: Vec<String>,
    /// Members serving TLS: how the cluster's own checks connect.
    tls: Option<Tls>,
}

/// Members serving TLS on their client URLs (`https://`), with these PEM files.
pub struct MemberTls {
    /// The members' certificate (for 127.0.0.1) and key.
    pub cert_file: std::path::PathBuf,
    /// Its private key.
    pub key_file: std::path::PathBuf,
    /// How clients connect: the CA of the members' certificate and, when the members ask
    /// clients for certificates (`--client-cert-auth`, signed by that CA), a client's.
    pub client: Tls,
}

/// `n` distinct free loopback ports: every listener is held until all are chosen, so the
/// kernel cannot hand one port out twice (two members on one port fail the cluster's start).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> =
        (0..n).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a free port")).collect();
    listeners.iter().map(|l| l.local_addr().expect("addr").port()).collect()
}

/// Whether etcd is installed; `false` prints a loud skip (a failure under `CI=true`).
pub fn etcd_available(test: &str) -> bool {
    let found =
        Command::new("etcd").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if !found {
        missing_tool::missing_tool(test, "etcd", "apt-get install etcd-server");
    }
    found
}

impl Cluster {
    /// Starts `n` members with the test limits; `None` (after a loud skip) without etcd.
    pub fn start(test: &str, n: usize) -> Option<Cluster> {
        Cluster::start_with(
            test,
            n,
            &[
                "--max-txn-ops".into(),
                MAX_TXN_OPS.to_string(),
                "--max-request-bytes".into(),
                MAX_REQUEST_BYTES.to_string(),
            ],
        )
    }

    /// Starts `n` members with the test limits, serving TLS to clients.
    pub fn start_tls(test: &str, n: usize, tls: MemberTls) -> Option<Cluster> {
        let path = |p: &std::path::Path| p.display().to_string();
        let mut extra = vec![
            "--max-txn-ops".into(),
            MAX_TXN_OPS.to_string(),
            "--max-request-bytes".into(),
            MAX_REQUEST_BYTES.to_string(),
            "--cert-file".into(),
            path(&tls.cert_file),
            "--key-file".into(),
            path(&tls.key_file),
            "--trusted-ca-file".into(),
            path(&tls.client.ca_file),
        ];
        if tls.client.identity.is_some() {
            extra.push("--client-cert-auth".into());
        }
        Cluster::start_members(test, n, &extra, Some(tls.client))
    }

    /// Starts `n` members with extra flags (etcd's defaults otherwise).
    pub fn start_with(test: &str, n: usize, extra: &[String]) -> Option<Cluster> {
        Cluster::start_members(test, n, extra, None)
    }

    fn start_members(test: &str, n: usize, extra: &[String], tls: Option<Tls>) -> Option<Cluster> {
        if !etcd_available(test) {
            return None;
        }
        let dir = TempDir::new("etcd");
        let ports = free_ports(2 * n);
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("m{i}"),
                client: ports[2 * i],
                peer: ports[2 * i + 1],
                child: None,
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster { dir, members, initial, extra: extra.to_vec(), tls };
        for i in 0..n {
            cluster.spawn(i);
        }
        cluster.wait_ready();
        Some(cluster)
    }

    fn spawn(&mut self, i: usize) {
        let m = &self.members[i];
        let data = self.dir.path().join(&m.name);
        let client = self.client_url(m.client);
        let peer = format!("http://127.0.0.1:{}", m.peer);
        let log = std::fs::File::create(self.dir.path().join(format!("{}.log", m.name))).expect("log file");
        let child = Command::new("etcd")
            .args(["--name", &m.name, "--data-dir"])
            .arg(&data)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial, "--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "rediskv-test", "--log-level", "error", "--logger", "zap"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.members[i].child = Some(child);
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| self.client_url(m.client)).collect()
    }

    fn client_url(&self, port: u16) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{port}")
    }

    /// Options for a backend under `prefix`, with the cluster's limits.
    pub fn options(&self, prefix: &str) -> Options {
        let mut options = Options::new(self.endpoints());
        options.tls = self.tls.clone();
        options.prefix = prefix.as_bytes().to_vec();
        options.max_txn_ops = MAX_TXN_OPS;
        options.max_request_bytes = MAX_REQUEST_BYTES;
        options
    }

    /// Opens a backend under `prefix`.
    pub fn open(&self, prefix: &str) -> Backend {
        crate::open(self.options(prefix)).expect("open etcd backend")
    }

    /// Waits until a read goes through (a leader is elected).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ok = crate::open(self.options("ready/"))
                .and_then(|b| b.get(ColumnFamily::Metadata, b"probe"))
                .is_ok();
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "etcd cluster did not become ready: {}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The member that leads the Raft group now (asked of each member in turn).
    pub fn leader(&self) -> usize {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            for (i, endpoint) in self.endpoints().iter().enumerate() {
                let tls = self.tls.as_ref().map(|t| t.options().expect("the TLS files"));
                let options = tls.map(|t| etcd_client::ConnectOptions::new().with_tls(t));
                let Ok(mut client) = etcd_client::Client::connect([endpoint], options).await else {
                    continue;
                };
                let Ok(status) = client.status().await else { continue };
                if status.header().is_some_and(|h| h.member_id() == status.leader()) {
                    return i;
                }
            }
            panic!("no member says it leads: {}", self.logs())
        })
    }

    /// SIGKILLs member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Restarts member `i` on its data dir.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
    }

    /// Kills every member, then starts them again on their data dirs.
    pub fn restart_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        for i in 0..self.members.len() {
            self.spawn(i);
        }
        self.wait_ready();
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// A TCP proxy in front of one etcd member that can lose an answer: armed with markers, it
/// forwards the next gRPC request whose HTTP/2 DATA frame contains every marker, then closes
/// both connections without relaying anything the member answers — the ambiguous failure of
/// a commit that reached the cluster but whose answer never came back. Everything else is
/// relayed unchanged.
pub struct CutProxy {
    port: u16,
    shared: Arc<ProxyShared>,
}

#[derive(Default)]
struct ProxyShared {
    armed: Mutex<Option<Vec<Vec<u8>>>>,
    cuts: AtomicU64,
    stop: AtomicBool,
}

impl CutProxy {
    /// Listens on a free loopback port and relays each connection to `upstream`
    /// (`http://127.0.0.1:port`).
    pub fn start(upstream: &str) -> CutProxy {
        let upstream = upstream.trim_start_matches("http://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        listener.set_nonblocking(true).expect("nonblocking listener");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(ProxyShared::default());
        let accepting = shared.clone();
        std::thread::spawn(move || {
            while !accepting.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let shared = accepting.clone();
                        let upstream = upstream.clone();
                        std::thread::spawn(move || relay(client, &upstream, &shared));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        CutProxy { port, shared }
    }

    /// The proxy's client URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Loses the answer to the next request whose DATA frame holds every one of `markers`.
    pub fn arm(&self, markers: &[&[u8]]) {
        *self.shared.armed.lock().unwrap() = Some(markers.iter().map(|m| m.to_vec()).collect());
    }

    /// How many answers it has lost.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::Relaxed)
    }
}

/// The stream identifier of an HTTP/2 frame header.
fn stream_id(header: &[u8; 9]) -> u32 {
    u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Relays one connection, reading both sides as HTTP/2 frames.
fn relay(mut client: TcpStream, upstream: &str, shared: &ProxyShared) {
    let Ok(mut server) = TcpStream::connect(upstream) else { return };
    client.set_nonblocking(false).expect("blocking client socket");
    // The stream whose answer is to be lost (0: none).
    let hold = Arc::new(AtomicU32::new(0));
    let (mut from_server, mut to_client) =
        (server.try_clone().expect("clone"), client.try_clone().expect("clone"));
    let holding = hold.clone();
    let answers = std::thread::spawn(move || {
        loop {
            let mut header = [0u8; 9];
            if from_server.read_exact(&mut header).is_err() {
                break;
            }
            let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
            let mut payload = vec![0u8; len];
            if from_server.read_exact(&mut payload).is_err() {
                break;
            }
            let held = holding.load(Ordering::SeqCst);
            if held != 0 {
                // Nothing more reaches the client. The member's answer to the held request (its
                // HEADERS or DATA on that stream) shows it applied it: then the cut. Frames sent
                // before it (a window update for the request) do not end the wait.
                if matches!(header[3], 0 | 1) && stream_id(&header) == held {
                    break;
                }
                continue;
            }
            if to_client.write_all(&header).is_err() || to_client.write_all(&payload).is_err() {
                break;
            }
        }
        let _ = to_client.shutdown(Shutdown::Both);
    });
    let mut preface = [0u8; 24];
    if client.read_exact(&mut preface).is_err() || server.write_all(&preface).is_err() {
        return;
    }
    loop {
        let mut header = [0u8; 9];
        if client.read_exact(&mut header).is_err() {
            break;
        }
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; len];
        if client.read_exact(&mut payload).is_err() {
            break;
        }
        let cut = header[3] == 0 && {
            let mut armed = shared.armed.lock().unwrap();
            let hit = armed.as_ref().is_some_and(|markers| {
                markers.iter().all(|m| payload.windows(m.len()).any(|w| w == m.as_slice()))
            });
            if hit {
                *armed = None;
                hold.store(stream_id(&header), Ordering::SeqCst);
                shared.cuts.fetch_add(1, Ordering::Relaxed);
            }
            hit
        };
        if server.write_all(&header).is_err() || server.write_all(&payload).is_err() {
            break;
        }
        if cut {
            // The answer is dropped when it comes (so the member applied it); then both sides.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !answers.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
