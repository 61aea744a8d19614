//! TLS with rustls (its *ring* provider): the server's contexts made from Redis 7.0's `tls-*`
//! parameters, and the client half ([`connect`]) that links the server dials out (replication,
//! cluster) use to reach a TLS peer.
//!
//! A context is made from the whole configuration at once ([`Contexts::build`]): at start
//! when `tls-port`, `tls-replication` or `tls-cluster` asks for TLS, and again by every
//! CONFIG SET of a `tls-*` parameter, as Redis' `tlsConfigure`. A context that cannot be made
//! (a missing file, a bad protocol name, no cipher left) is refused whole and the running one
//! stays. `tls-auth-clients` is read at each accept, as in Redis, so a context holds a server
//! configuration for each of its values.
//!
//! What rustls does not do: TLS 1.0 and 1.1, CBC cipher suites, DH parameters (rustls uses
//! ECDHE only: `tls-dh-params-file` is accepted and not read). An encrypted private key is
//! read in PKCS#8 form only (`ENCRYPTED PRIVATE KEY`, not OpenSSL's older `Proc-Type`
//! headers).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{
    ClientCertVerifierBuilder, NoServerSessionStorage, StoresServerSessions, WebPkiClientVerifier,
};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme, StreamOwned, SupportedCipherSuite, SupportedProtocolVersion,
};

// `tests/tls.rs` compiles this file with `sync.rs` alone: it uses nothing else of the crate
// (the configuration comes through [`Params`]).
use crate::sync::lock;

/// A TLS client stream over a blocking socket, as [`connect`] returns it.
#[allow(dead_code)] // for the links that dial out; tests/tls.rs drives it
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// A link the server dials to another server (its primary, a cluster node): plain TCP, or
/// a TLS session over it.
#[allow(dead_code)] // tests/tls.rs compiles this file without the links
pub enum Dialed {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS (`tls-replication`, `tls-cluster`).
    Tls(Box<TlsStream>),
}

#[allow(dead_code)]
impl Dialed {
    /// Dials `host:port` within `timeout`: over TLS with `tls` (a configuration from
    /// [`Tls::client`]), plain TCP without; reads and writes time out after `timeout` too.
    ///
    /// # Errors
    /// The address, the connection or the handshake failed, in words for a log or a reply.
    pub fn dial(
        host: &str,
        port: u16,
        timeout: Duration,
        tls: Option<Arc<ClientConfig>>,
    ) -> Result<Dialed, String> {
        use std::net::ToSocketAddrs;
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve {host}"))?;
        let dialed = match tls {
            Some(config) => Dialed::Tls(Box::new(
                connect(addr, host, config, timeout)
                    .map_err(|e| format!("cannot connect to {addr} over TLS: {e}"))?,
            )),
            None => {
                let stream = TcpStream::connect_timeout(&addr, timeout)
                    .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
                let _ = stream.set_nodelay(true);
                Dialed::Plain(stream)
            }
        };
        let tcp = dialed.tcp();
        tcp.set_read_timeout(Some(timeout))
            .and_then(|()| tcp.set_write_timeout(Some(timeout)))
            .map_err(|e| e.to_string())?;
        Ok(dialed)
    }

    /// The socket under the session.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Dialed::Plain(s) => s,
            Dialed::Tls(s) => &s.sock,
        }
    }
}

impl io::Read for Dialed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Dialed::Plain(s) => s.read(buf),
            Dialed::Tls(s) => s.read(buf),
        }
    }
}

impl io::Write for Dialed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Dialed::Plain(s) => s.write(buf),
            Dialed::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Dialed::Plain(s) => s.flush(),
            Dialed::Tls(s) => s.flush(),
        }
    }
}

/// The parameters a context is made from, by name, as `CONFIG GET` shows them ("" when
/// not set).
pub trait Params {
    /// The value of parameter `name`.
    fn param(&self, name: &str) -> &str;
}

/// The TLS contexts in force: none until TLS is first configured.
#[derive(Default)]
pub struct Tls {
    contexts: Mutex<Option<Arc<Contexts>>>,
}

impl Tls {
    /// Makes the contexts `config` describes and puts them in force.
    ///
    /// # Errors
    /// Why they cannot be made (Redis logs it, and answers "Unable to update TLS
    /// configuration").
    pub fn configure(&self, config: &dyn Params) -> Result<(), String> {
        let contexts = Contexts::build(config)?;
        *lock(&self.contexts) = Some(Arc::new(contexts));
        Ok(())
    }

    /// Whether contexts were made.
    pub fn configured(&self) -> bool {
        lock(&self.contexts).is_some()
    }

    /// The server configuration for a new connection under `tls-auth-clients` = `auth`;
    /// None when TLS is not configured, or when client certificates are asked for and no CA
    /// was given to check them.
    pub fn server(&self, auth: &str) -> Option<Arc<ServerConfig>> {
        let contexts = lock(&self.contexts).clone()?;
        match auth {
            "no" => Some(contexts.no_auth.clone()),
            "optional" => contexts.optional_auth.clone(),
            _ => contexts.required_auth.clone(),
        }
    }

    /// The client configuration for the links the server dials (`tls-replication`,
    /// `tls-cluster`); None when TLS is not configured or no CA was given.
    pub fn client(&self) -> Option<Arc<ClientConfig>> {
        lock(&self.contexts).as_ref()?.client.clone()
    }
}

/// The rustls configurations made from one reading of the `tls-*` parameters.
pub struct Contexts {
    /// For `tls-auth-clients no`: no client certificate asked for.
    no_auth: Arc<ServerConfig>,
    /// For `optional`: a client certificate, if sent, must be signed by the CA.
    optional_auth: Option<Arc<ServerConfig>>,
    /// For `yes`: a client certificate signed by the CA is required.
    required_auth: Option<Arc<ServerConfig>>,
    /// For the links the server dials.
    client: Option<Arc<ClientConfig>>,
}

impl Contexts {
    /// The contexts for `config`'s `tls-*` parameters, checked as Redis' `tlsConfigure`.
    ///
    /// # Errors
    /// The first problem found, in words for the log.
    pub fn build(config: &dyn Params) -> Result<Contexts, String> {
        let text = |name: &str| Some(config.param(name)).filter(|v| !v.is_empty());
        let cert_file = text("tls-cert-file").ok_or("No tls-cert-file configured!")?;
        let key_file = text("tls-key-file").ok_or("No tls-key-file configured!")?;
        let roots = match (text("tls-ca-cert-file"), text("tls-ca-cert-dir")) {
            (None, None) => None,
            (file, dir) => Some(Arc::new(roots(file, dir)?)),
        };
        let asks_ca = config.param("tls-auth-clients") != "no"
            || config.param("tls-replication") == "yes"
            || config.param("tls-cluster") == "yes";
        if asks_ca && roots.is_none() {
            return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
        }
        let versions = protocols(config.param("tls-protocols"))?;
        // rustls deprecates *ring* for its lack of post-quantum key exchange; its classical
        // groups are those Redis' OpenSSL 3.0 offers, and aws-lc-rs costs a large C build.
        #[allow(deprecated)]
        let provider = Arc::new(CryptoProvider {
            cipher_suites: cipher_suites(config.param("tls-ciphers"), config.param("tls-ciphersuites"))?,
            ..ring::default_provider()
        });
        let certs = certificates(cert_file)?;
        let key = private_key(key_file, config.param("tls-key-file-pass"))?;
        let caching = config.param("tls-session-caching") == "yes";
        let number = |name: &str| config.param(name).parse::<usize>().unwrap_or(0);
        // One cache for the three server configurations: a session resumes whichever
        // tls-auth-clients is in force.
        let sessions = Arc::new(Sessions::new(
            number("tls-session-cache-size"),
            Duration::from_secs(number("tls-session-cache-timeout") as u64),
        ));
        let prefer_server_ciphers = config.param("tls-prefer-server-ciphers") == "yes";
        let server = |verifier: Option<ClientCertVerifierBuilder>| -> Result<Arc<ServerConfig>, String> {
            let builder = ServerConfig::builder_with_provider(provider.clone())
                .with_protocol_versions(&versions)
                .map_err(|e| format!("Failed to configure TLS: {e}"))?;
            let builder = match verifier {
                None => builder.with_no_client_auth(),
                Some(verifier) => builder.with_client_cert_verifier(
                    verifier.build().map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?,
                ),
            };
            let mut server = builder
                .with_single_cert(certs.clone(), key.clone_key())
                .map_err(|e| format!("Failed to load certificate or private key: {cert_file}: {e}"))?;
            server.ignore_client_order = prefer_server_ciphers;
            if caching {
                server.session_storage = sessions.clone();
            } else {
                server.session_storage = Arc::new(NoServerSessionStorage {});
                server.send_tls13_tickets = 0;
            }
            Ok(Arc::new(server))
        };
        let verifier = |roots: &Arc<RootCertStore>| {
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        };
        let no_auth = server(None)?;
        let (optional_auth, required_auth, client) = match &roots {
            None => (None, None, None),
            Some(roots) => {
                let optional = server(Some(verifier(roots).allow_unauthenticated()))?;
                let required = server(Some(verifier(roots)))?;
                let client = client_config(config, roots, &provider, &versions)?;
                (Some(optional), Some(required), Some(client))
            }
        };
        Ok(Contexts { no_auth, optional_auth, required_auth, client })
    }
}

/// The server's TLS sessions for resumption (`tls-session-caching`): at most `capacity`
/// (0: no limit, as OpenSSL), the oldest dropped first, each for `timeout`
/// (`tls-session-cache-timeout`).
#[derive(Debug)]
struct Sessions {
    capacity: usize,
    timeout: Duration,
    stored: Mutex<Stored>,
}

/// The sessions of [`Sessions`].
#[derive(Debug, Default)]
struct Stored {
    /// Session id → (when stored, session).
    by_id: HashMap<Vec<u8>, (Instant, Vec<u8>)>,
    /// The ids, oldest first (with some already taken).
    oldest_first: VecDeque<Vec<u8>>,
}

impl Sessions {
    fn new(capacity: usize, timeout: Duration) -> Sessions {
        Sessions { capacity, timeout, stored: Mutex::default() }
    }
}

impl StoresServerSessions for Sessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut stored = lock(&self.stored);
        let Stored { by_id: map, oldest_first: order } = &mut *stored;
        // The oldest first: expired ones, and ids already taken.
        while let Some(oldest) = order.front() {
            if map.get(oldest).is_some_and(|(at, _)| at.elapsed() < self.timeout) {
                break;
            }
            map.remove(oldest);
            order.pop_front();
        }
        if map.insert(key.clone(), (Instant::now(), value)).is_none() {
            order.push_back(key);
        }
        while self.capacity > 0 && map.len() > self.capacity {
            let Some(oldest) = order.pop_front() else { break };
            map.remove(&oldest);
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let stored = lock(&self.stored);
        let (at, value) = stored.by_id.get(key)?;
        (at.elapsed() < self.timeout).then(|| value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        // Its id leaves `oldest_first` when it reaches the front.
        let (at, value) = lock(&self.stored).by_id.remove(key)?;
        (at.elapsed() < self.timeout).then_some(value)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// The client side: the server's own certificate unless `tls-client-cert-file` and
/// `tls-client-key-file` name another, and the peer's certificate checked against the CA.
fn client_config(
    config: &dyn Params,
    roots: &Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
) -> Result<Arc<ClientConfig>, String> {
    let (cert_file, key_file, pass) = match config.param("tls-client-cert-file") {
        "" => {
            (config.param("tls-cert-file"), config.param("tls-key-file"), config.param("tls-key-file-pass"))
        }
        file => (file, config.param("tls-client-key-file"), config.param("tls-client-key-file-pass")),
    };
    let verifier = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?;
    let client = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("Failed to configure TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
        .with_client_auth_cert(certificates(cert_file)?, private_key(key_file, pass)?)
        .map_err(|e| format!("Failed to load certificate or private key: {cert_file}: {e}"))?;
    Ok(Arc::new(client))
}

/// Dials `addr` and completes a TLS handshake with `config` (from [`Tls::client`]) within
/// `timeout`; the stream then reads and writes plaintext, blocking. `server_name` is what
/// the client announces (SNI, when a host name); as Redis, the peer's certificate is checked
/// against the CA and not against that name, since peers are often dialed by address.
///
/// # Errors
/// The connection, or the handshake (an untrusted certificate, no common protocol), failed.
pub fn connect(
    addr: std::net::SocketAddr,
    server_name: &str,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> io::Result<TlsStream> {
    let name = ServerName::try_from(server_name.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
    let socket = TcpStream::connect_timeout(&addr, timeout)?;
    socket.set_nodelay(true)?;
    socket.set_read_timeout(Some(timeout))?;
    socket.set_write_timeout(Some(timeout))?;
    let mut stream = StreamOwned::new(conn, socket);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// Checks a server's certificate chain against the CA and accepts any name in it, as
/// OpenSSL does for Redis' links (it sets no host name to check).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain is checked before the name: a name mismatch means a trusted chain.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The certificates of a PEM file.
fn certificates(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let fail = |e: &dyn std::fmt::Display| format!("Failed to load certificate: {file}: {e}");
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| fail(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(&e))?;
    if certs.is_empty() {
        return Err(fail(&"no certificate in it"));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1), or its encrypted PKCS#8 key
/// (`ENCRYPTED PRIVATE KEY`, as `openssl pkey -aes256` writes it) decrypted with `pass`.
fn private_key(file: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |e: &dyn std::fmt::Display| format!("Failed to load private key: {file}: {e}");
    let text = std::fs::read_to_string(file).map_err(|e| fail(&e))?;
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    match (text.find(BEGIN), text.find(END)) {
        (Some(begin), Some(end)) if begin < end => {
            if pass.is_empty() {
                return Err(fail(&"the key is encrypted and no password is set (tls-key-file-pass)"));
            }
            decrypt(&text[begin..end + END.len()], pass).map_err(|e| fail(&e))
        }
        _ => PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| fail(&e)),
    }
}

/// An `ENCRYPTED PRIVATE KEY` PEM section decrypted with `pass` (PBES2: PBKDF2 or scrypt,
/// AES-CBC).
fn decrypt(pem: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let (_, document) = pkcs8::SecretDocument::from_pem(pem).map_err(|e| e.to_string())?;
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(document.as_bytes()).map_err(|e| e.to_string())?;
    let key = info.decrypt(pass).map_err(|e| format!("cannot decrypt it: {e}"))?;
    Ok(PrivateKeyDer::Pkcs8(key.as_bytes().to_vec().into()))
}

/// The CA certificates of `tls-ca-cert-file` and of every file in `tls-ca-cert-dir`.
fn roots(file: Option<&str>, dir: Option<&str>) -> Result<RootCertStore, String> {
    let fail =
        |e: &dyn std::fmt::Display| format!("Failed to configure CA certificate(s) file/directory: {e}");
    let mut roots = RootCertStore::empty();
    let mut files: Vec<std::path::PathBuf> = file.map(Into::into).into_iter().collect();
    if let Some(dir) = dir {
        let entries = std::fs::read_dir(dir).map_err(|e| fail(&format!("{dir}: {e}")))?;
        let mut found: Vec<_> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
        found.sort();
        files.extend(found);
    }
    for path in files {
        let certs =
            CertificateDer::pem_file_iter(&path).map_err(|e| fail(&format!("{}: {e}", path.display())))?;
        for cert in certs {
            // A file of the directory that is not a certificate (an index, a CRL) is skipped.
            let Ok(cert) = cert else { continue };
            roots.add(cert).map_err(|e| fail(&format!("{}: {e}", path.display())))?;
        }
    }
    if roots.is_empty() {
        return Err(fail(&"no CA certificate found"));
    }
    Ok(roots)
}

/// `tls-protocols`: words among TLSv1, TLSv1.1, TLSv1.2 and TLSv1.3 (any case); empty for
/// TLS 1.2 and 1.3, Redis' default.
fn protocols(value: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    if value.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut versions = Vec::new();
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1" | "tlsv1.1" => {}
            _ => {
                return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into());
            }
        }
    }
    if versions.is_empty() {
        return Err(format!(
            "tls-protocols '{value}': TLSv1 and TLSv1.1 are not supported, only TLSv1.2 and TLSv1.3"
        ));
    }
    Ok(versions)
}

/// The cipher suites, by their OpenSSL names, and whether each is TLS 1.3's.
const SUITES: [(&str, SupportedCipherSuite); 9] = [
    ("TLS_AES_256_GCM_SHA384", ring::cipher_suite::TLS13_AES_256_GCM_SHA384),
    ("TLS_AES_128_GCM_SHA256", ring::cipher_suite::TLS13_AES_128_GCM_SHA256),
    ("TLS_CHACHA20_POLY1305_SHA256", ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-ECDSA-AES128-GCM-SHA256", ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", ring::cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ("ECDHE-RSA-AES256-GCM-SHA384", ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-RSA-AES128-GCM-SHA256", ring::cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-RSA-CHACHA20-POLY1305", ring::cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
];

/// The suites `tls-ciphers` (TLS 1.2, an OpenSSL cipher list) and `tls-ciphersuites`
/// (TLS 1.3, names joined by `:`) leave; either empty leaves all of its version's.
///
/// # Errors
/// A list that leaves none of its version's suites (as OpenSSL refuses it).
fn cipher_suites(ciphers: &str, ciphersuites: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let (tls13, tls12): (Vec<&(&str, SupportedCipherSuite)>, Vec<_>) =
        SUITES.iter().partition(|(name, _)| name.starts_with("TLS_"));
    let chosen13 = if ciphersuites.is_empty() {
        tls13.iter().map(|(_, s)| *s).collect()
    } else {
        // In the list's order: the server's preference (tls-prefer-server-ciphers).
        let chosen: Vec<_> = ciphersuites
            .split(':')
            .filter_map(|name| tls13.iter().find(|(n, _)| *n == name.trim()).map(|(_, s)| *s))
            .collect();
        if chosen.is_empty() {
            return Err(format!("Failed to configure ciphersuites: {ciphersuites}"));
        }
        chosen
    };
    let chosen12 = if ciphers.is_empty() {
        tls12.iter().map(|(_, s)| *s).collect()
    } else {
        let chosen = openssl_cipher_list(ciphers, &tls12);
        if chosen.is_empty() {
            return Err(format!("Failed to configure ciphers: {ciphers}"));
        }
        chosen
    };
    Ok(chosen13.into_iter().chain(chosen12).collect())
}

/// The TLS 1.2 suites an OpenSSL cipher list keeps, in its order: words joined by `:`, `,`
/// or spaces; `DEFAULT`, `ALL` and `HIGH` name every suite, another word the suites whose
/// name holds it (`ECDHE-RSA-AES256-GCM-SHA384`, `CHACHA20`); `-word` and `!word` take
/// suites out; words naming only suites rustls lacks (CBC, RSA key exchange) keep none.
fn openssl_cipher_list(list: &str, suites: &[&(&str, SupportedCipherSuite)]) -> Vec<SupportedCipherSuite> {
    let mut kept: Vec<&str> = Vec::new();
    let mut banned: Vec<&str> = Vec::new();
    for word in list.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        let (remove, ban, word) = match word.as_bytes()[0] {
            b'-' => (true, false, &word[1..]),
            b'!' => (true, true, &word[1..]),
            b'+' => (false, false, &word[1..]),
            _ => (false, false, word),
        };
        let all = matches!(word.to_ascii_uppercase().as_str(), "DEFAULT" | "ALL" | "HIGH");
        let matching = suites.iter().map(|(n, _)| *n).filter(|n| all || n.contains(word));
        for name in matching {
            if remove {
                kept.retain(|k| *k != name);
                if ban {
                    banned.push(name);
                }
            } else if !kept.contains(&name) && !banned.contains(&name) {
                kept.push(name);
            }
        }
    }
    kept.iter().filter_map(|k| suites.iter().find(|(n, _)| n == k).map(|(_, s)| *s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(suites: &[SupportedCipherSuite]) -> Vec<String> {
        suites.iter().map(|s| format!("{:?}", s.suite())).collect()
    }

    #[test]
    fn sessions_keep_the_newest_within_their_timeout() {
        let sessions = Sessions::new(2, Duration::from_secs(300));
        for id in [1u8, 2, 3] {
            assert!(sessions.put(vec![id], vec![id * 10]));
        }
        assert_eq!(sessions.get(&[1]), None, "the oldest went past the capacity");
        assert_eq!(sessions.get(&[2]), Some(vec![20]));
        assert_eq!(sessions.take(&[2]), Some(vec![20]));
        assert_eq!(sessions.get(&[2]), None, "taken once");
        sessions.put(vec![4], vec![40]);
        assert_eq!((sessions.get(&[3]), sessions.get(&[4])), (Some(vec![30]), Some(vec![40])));
        let expired = Sessions::new(0, Duration::ZERO);
        expired.put(vec![1], vec![1]);
        assert_eq!(expired.get(&[1]), None, "past tls-session-cache-timeout");
        expired.put(vec![2], vec![2]);
        assert_eq!(lock(&expired.stored).by_id.len(), 1, "the expired one left when another came");
    }

    #[test]
    fn protocols_read_as_redis() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap(), [&rustls::version::TLS12]);
        assert_eq!(protocols("tlsv1.2  TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv1.2 SSLv3").unwrap_err().contains("Invalid tls-protocols"));
        assert!(protocols("TLSv1").is_err(), "nothing left that rustls speaks");
    }

    #[test]
    fn cipher_lists_keep_what_they_name() {
        let all = cipher_suites("", "").unwrap();
        assert_eq!(all.len(), SUITES.len());
        let only = cipher_suites("ECDHE-RSA-AES256-GCM-SHA384", "TLS_AES_128_GCM_SHA256").unwrap();
        assert_eq!(names(&only), ["TLS13_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"]);
        let ordered =
            cipher_suites("CHACHA20:AES128", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(
            names(&ordered),
            [
                "TLS13_CHACHA20_POLY1305_SHA256",
                "TLS13_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
            ],
            "in the lists' orders"
        );
        let without = cipher_suites("DEFAULT:-CHACHA20:!ECDSA", "").unwrap();
        assert_eq!(
            names(&without[3..]),
            ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
        // Redis' own test list: the CBC suite it removes is not here, the rest stays.
        assert_eq!(cipher_suites("DEFAULT:-AES128-SHA256", "").unwrap().len(), SUITES.len());
        assert!(cipher_suites("AES128-SHA256", "").unwrap_err().starts_with("Failed to configure ciphers"));
        assert!(cipher_suites("", "TLS_NOPE").unwrap_err().starts_with("Failed to configure ciphersuites"));
    }
}
