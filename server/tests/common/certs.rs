//! Certificates for the TLS tests, made with rcgen (`#[path]`-included by the tests that
//! serve TLS).

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// A directory of PEM files, removed on drop: `ca.crt`; `server.crt`/`.key` and
/// `server2.crt`/`.key` (localhost, 127.0.0.1) and `client.crt`/`.key`, signed by it; and
/// `stranger.crt`/`.key`, a client certificate of another CA.
pub struct Certs {
    /// The directory.
    pub dir: PathBuf,
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Certs {
    pub fn new() -> Certs {
        let dir = std::env::temp_dir().join(format!(
            "rediskv-tls-{}-{}",
            std::process::id(),
            super::common::test_name()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let certs = Certs { dir };
        let ca = certs.authority("rediskv test CA", "ca");
        // The server's certificates serve its links too (no tls-client-cert-file).
        let both = [ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        certs.leaf(&ca, "server", "rediskv test server", &both);
        certs.leaf(&ca, "server2", "rediskv test server 2", &both);
        certs.encrypt("server2.key", "server2.enc.key", "1234");
        certs.leaf(&ca, "client", "rediskv test client", &[ExtendedKeyUsagePurpose::ClientAuth]);
        let other = certs.authority("another CA", "other-ca");
        certs.leaf(&other, "stranger", "stranger", &[ExtendedKeyUsagePurpose::ClientAuth]);
        certs
    }

    /// A self-signed CA certificate, written as `name.crt`.
    pub fn authority(&self, common_name: &str, name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), ca.pem()).unwrap();
        ca
    }

    /// A certificate for localhost and 127.0.0.1 signed by `ca`, as `name.crt` and `name.key`.
    pub fn leaf(
        &self,
        ca: &CertifiedIssuer<'_, KeyPair>,
        name: &str,
        common_name: &str,
        usage: &[ExtendedKeyUsagePurpose],
    ) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = usage.to_vec();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, ca).unwrap();
        std::fs::write(self.path(&format!("{name}.crt")), cert.pem()).unwrap();
        std::fs::write(self.path(&format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    /// Writes `plain`'s PKCS#8 key encrypted with `password` (PBKDF2-SHA256, AES-256-CBC, as
    /// `openssl pkey -aes256` does) as `encrypted`.
    pub fn encrypt(&self, plain: &str, encrypted: &str, password: &str) {
        let pem = std::fs::read_to_string(self.path(plain)).unwrap();
        let (_, der) = pkcs8::SecretDocument::from_pem(&pem).unwrap();
        let info = pkcs8::PrivateKeyInfo::try_from(der.as_bytes()).unwrap();
        let params =
            pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"salt1234", b"iv-iv-iv-iv-iv-1")
                .unwrap();
        let sealed = info.encrypt_with_params(params, password).unwrap();
        let pem = sealed.to_pem("ENCRYPTED PRIVATE KEY", pkcs8::LineEnding::LF).unwrap();
        std::fs::write(self.path(encrypted), pem.as_bytes()).unwrap();
    }

    pub fn path(&self, file: &str) -> String {
        self.dir.join(file).display().to_string()
    }

    /// The server's TLS arguments: its certificate and the CA, on `tls_port`.
    pub fn server_args(&self, tls_port: u16) -> Vec<String> {
        [
            ("--tls-port", tls_port.to_string()),
            ("--tls-cert-file", self.path("server.crt")),
            ("--tls-key-file", self.path("server.key")),
            ("--tls-ca-cert-file", self.path("ca.crt")),
        ]
        .into_iter()
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }
}
