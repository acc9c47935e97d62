//! TLS for the bench client: a self-signed certificate made at run time (for 127.0.0.1 and
//! localhost; never a key on disk beyond the run's temporary directory, never a committed one),
//! the PEM file a broker's `ssl.keystore.location` reads (certificate chain, then the PKCS#8 key),
//! and the rustls configurations that trust exactly that certificate; or the certificate of a PEM
//! keystore the caller made (a broker the bench did not start).
//!
//! Must never: trust any certificate but the one generated or read here, or write the key anywhere but the
//! directory the caller owns for the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// The names the certificate is valid for; the client connects to loopback only.
const SUBJECT_ALT_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// A self-signed certificate and its key, generated for one run.
pub struct RunCertificate {
    certificate: CertificateDer<'static>,
    key_pkcs8: Vec<u8>,
    /// The certificate then the PKCS#8 private key, both PEM.
    pem: String,
}

impl RunCertificate {
    /// Generates a fresh key pair and certificate.
    pub fn generate() -> anyhow::Result<Self> {
        let names: Vec<String> = SUBJECT_ALT_NAMES
            .iter()
            .map(|&name| name.to_owned())
            .collect();
        let certified =
            rcgen::generate_simple_self_signed(names).context("generating a certificate")?;
        let pem = format!(
            "{}{}",
            certified.cert.pem(),
            certified.key_pair.serialize_pem()
        );
        Ok(Self {
            certificate: certified.cert.der().clone(),
            key_pkcs8: certified.key_pair.serialize_der(),
            pem,
        })
    }

    /// The certificate and PKCS#8 key of a PEM keystore made outside the bench (the broker's own
    /// `ssl.keystore.location` when the bench did not start it): the first certificate is the one
    /// trusted.
    pub fn from_keystore_pem(pem: &str) -> anyhow::Result<Self> {
        use rustls::pki_types::pem::PemObject;
        let certificate = CertificateDer::from_pem_slice(pem.as_bytes())
            .context("no certificate in the keystore")?;
        let key = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
            .context("no PKCS#8 private key in the keystore")?;
        Ok(Self {
            certificate,
            key_pkcs8: key.secret_pkcs8_der().to_vec(),
            pem: pem.to_owned(),
        })
    }

    /// The PEM keystore (certificate chain and PKCS#8 key) a broker reads.
    pub fn keystore_pem(&self) -> &str {
        &self.pem
    }

    /// Writes the PEM keystore into `directory` (which the caller owns and removes) and returns
    /// its path.
    pub fn write_keystore(&self, directory: &Path) -> anyhow::Result<PathBuf> {
        let path = directory.join("skiff-bench-keystore.pem");
        std::fs::write(&path, &self.pem).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// A client configuration trusting this certificate only.
    pub fn client_config(&self) -> anyhow::Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.certificate.clone())
            .context("trusting the run's certificate")?;
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }

    /// A server configuration presenting this certificate (the tests' echo server).
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8.clone()));
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_no_client_auth()
            .with_single_cert(vec![self.certificate.clone()], key)
            .context("server certificate")?;
        Ok(Arc::new(config))
    }
}

/// The crypto provider, named rather than taken from the process default, which depends on the
/// features other crates of the build enable.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The name the client checks the broker's certificate against: the host of a `host:port`.
pub fn server_name(address: &str) -> anyhow::Result<ServerName<'static>> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    ServerName::try_from(host.to_owned()).with_context(|| format!("server name of {address}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystore_holds_the_certificate_then_a_pkcs8_key() {
        let certificate = RunCertificate::generate().expect("generate");
        let pem = certificate.keystore_pem();
        let begin_certificate = pem
            .find("-----BEGIN CERTIFICATE-----")
            .expect("certificate");
        let begin_key = pem.find("-----BEGIN PRIVATE KEY-----").expect("PKCS#8 key");
        assert!(begin_certificate < begin_key);
        let directory = tempfile::tempdir().expect("tempdir");
        let path = certificate.write_keystore(directory.path()).expect("write");
        assert_eq!(std::fs::read_to_string(path).expect("read"), pem);
    }

    #[test]
    fn a_keystore_read_back_is_the_certificate_it_was_written_from() {
        let written = RunCertificate::generate().expect("generate");
        let read = RunCertificate::from_keystore_pem(written.keystore_pem()).expect("read");
        assert_eq!(read.certificate, written.certificate);
        assert_eq!(read.key_pkcs8, written.key_pkcs8);
        assert!(RunCertificate::from_keystore_pem("no PEM here").is_err());
    }

    #[test]
    fn two_runs_get_different_keys() {
        let first = RunCertificate::generate().expect("first");
        let second = RunCertificate::generate().expect("second");
        assert_ne!(first.key_pkcs8, second.key_pkcs8);
    }

    #[test]
    fn server_names_are_the_host_part() {
        assert!(matches!(
            server_name("127.0.0.1:9093").expect("ip"),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("localhost:9093").expect("dns"),
            ServerName::DnsName(_)
        ));
        assert!(matches!(
            server_name("[::1]:9093").expect("ipv6"),
            ServerName::IpAddress(_)
        ));
    }
}
