//! TLS for SSL and SASL_SSL listeners: the rustls server configuration built from the PEM files the
//! config names (the keystore's certificate chain and key, the truststore's CA certificates for
//! client certificates), and the principal a verified client certificate stands for.
//!
//! Must never: start a TLS listener with a key or certificate it could not read (a clear error at
//! start instead), or take a principal from an unverified certificate.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::{ClientAuth, Config, ConfigError};

fn unusable(key: &str, path: &Path, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        reason: format!("{}: {reason}", path.display()),
    }
}

/// Builds the acceptor every TLS listener shares, from `ssl.keystore.location`,
/// `ssl.truststore.location` and `ssl.client.auth`.
pub(crate) fn acceptor(config: &Config) -> Result<TlsAcceptor, ConfigError> {
    let key_name = "ssl.keystore.location";
    let keystore =
        config
            .ssl_keystore_location
            .as_deref()
            .ok_or_else(|| ConfigError::InvalidValue {
                key: key_name.to_owned(),
                reason: "a TLS listener needs it".to_owned(),
            })?;
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(keystore)
        .map_err(|error| unusable(key_name, keystore, error))?
        .collect::<Result<_, _>>()
        .map_err(|error| unusable(key_name, keystore, error))?;
    if certificates.is_empty() {
        return Err(unusable(key_name, keystore, "no CERTIFICATE block"));
    }
    let key = PrivateKeyDer::from_pem_file(keystore).map_err(|error| {
        unusable(
            key_name,
            keystore,
            format!("no usable unencrypted private key ({error})"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| unusable(key_name, keystore, error))?;
    let builder = match config.ssl_client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Requested | ClientAuth::Required => {
            let trust_name = "ssl.truststore.location";
            let truststore = config.ssl_truststore_location.as_deref().ok_or_else(|| {
                ConfigError::InvalidValue {
                    key: trust_name.to_owned(),
                    reason: "ssl.client.auth needs it".to_owned(),
                }
            })?;
            let mut roots = RootCertStore::empty();
            for certificate in CertificateDer::pem_file_iter(truststore)
                .map_err(|error| unusable(trust_name, truststore, error))?
            {
                let certificate =
                    certificate.map_err(|error| unusable(trust_name, truststore, error))?;
                roots
                    .add(certificate)
                    .map_err(|error| unusable(trust_name, truststore, error))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if config.ssl_client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|error| unusable(trust_name, truststore, error))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let server_config = builder
        .with_single_cert(certificates, key)
        .map_err(|error| unusable(key_name, keystore, error))?;
    Ok(TlsAcceptor::from(Arc::new(server_config)))
}

/// The principal name of a verified client certificate: its subject in RFC 2253 form (last RDN
/// first, `CN=alice,OU=eng,O=Example`), as Kafka's default principal builder names SSL users.
pub(crate) fn certificate_principal(certificate: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate.as_ref()).ok()?;
    let mut parts = Vec::new();
    for rdn in parsed
        .subject()
        .iter_rdn()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        for attribute in rdn.iter() {
            let oid = attribute.attr_type();
            let name = x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                .map(str::to_owned)
                .unwrap_or_else(|_| oid.to_id_string());
            let value = attribute.as_str().ok()?;
            parts.push(format!("{name}={value}"));
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_names_its_subject_like_kafka() {
        let mut params = rcgen::CertificateParams::new(vec!["client".to_owned()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = params.self_signed(&key).expect("certificate");
        assert_eq!(
            certificate_principal(certificate.der()).as_deref(),
            Some("CN=alice,O=Example")
        );
    }

    #[test]
    fn unreadable_or_keyless_keystores_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = dir.path().join("missing.pem");
        let config = Config {
            ssl_keystore_location: Some(missing.clone()),
            ..Config::default()
        };
        let error = acceptor(&config).err().expect("missing file").to_string();
        assert!(error.contains("missing.pem"), "{error}");

        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        let cert_only = dir.path().join("cert-only.pem");
        std::fs::write(&cert_only, certificate.pem()).expect("write");
        let config = Config {
            ssl_keystore_location: Some(cert_only),
            ..Config::default()
        };
        let error = acceptor(&config).err().expect("no key").to_string();
        assert!(error.contains("private key"), "{error}");

        let both = dir.path().join("both.pem");
        std::fs::write(
            &both,
            format!("{}{}", certificate.pem(), key.serialize_pem()),
        )
        .expect("write");
        let config = Config {
            ssl_keystore_location: Some(both),
            ..Config::default()
        };
        assert!(acceptor(&config).is_ok());
    }
}
