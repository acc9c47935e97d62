//! TLS for SSL and SASL_SSL listeners: the rustls server configuration built from the PEM files the
//! config names (the keystore's certificate chain and key, the truststore's CA certificates for
//! client certificates; [`live`] builds it again when a keystore changes, and holds each TLS
//! listener's current one), and the principal a verified client certificate stands for. The
//! handshake itself is the network edge's (`crate::net::server`).
//!
//! Must never: start a TLS listener with a key or certificate it could not read (a clear error at
//! start instead), or take a principal from an unverified certificate.

pub(crate) mod live;

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;
use x509_parser::der_parser::asn1_rs::ToDer;
use x509_parser::x509::X509Name;

use crate::config::{ClientAuth, Config, ConfigError};
use crate::security::x500_name;

fn unusable(key: &str, path: &Path, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        reason: format!("{}: {reason}", path.display()),
    }
}

/// Builds a TLS listener's acceptor from `keystore` (the listener's own keystore or
/// `ssl.keystore.location`, see `Config::keystore_of`), `ssl.truststore.location` and
/// `ssl.client.auth`.
pub(crate) fn acceptor_with_keystore(
    config: &Config,
    keystore: &Path,
) -> Result<TlsAcceptor, ConfigError> {
    let key_name = "ssl.keystore.location";
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

/// The principal name of a verified client certificate: its subject as Kafka's default principal
/// builder names SSL users (`X500Principal.getName(RFC2253)`, see [`x500_name`]), last RDN first:
/// `CN=alice,OU=eng,O=Example`. `None` for an unreadable certificate or an empty subject.
pub(crate) fn certificate_principal(certificate: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate.as_ref()).ok()?;
    subject_principal(parsed.subject())
}

/// The subject names of the certificates in a PEM file, as [`certificate_principal`] names them
/// (`None` for a certificate without a readable subject), for `skiff ssl-principal`.
pub fn pem_subject_names(
    path: &Path,
) -> Result<Vec<Option<String>>, rustls::pki_types::pem::Error> {
    CertificateDer::pem_file_iter(path)?
        .map(|certificate| certificate.map(|der| certificate_principal(&der)))
        .collect()
}

/// The RFC 2253 name of `subject`, `None` when it is empty or a value does not re-encode.
fn subject_principal(subject: &X509Name<'_>) -> Option<String> {
    let mut rdns = Vec::new();
    for rdn in subject.iter_rdn() {
        let mut attributes = Vec::new();
        for attribute in rdn.iter() {
            let value = attribute.attr_value();
            attributes.push(x500_name::Attribute {
                oid: attribute.attr_type().to_id_string(),
                tag: value.tag().0,
                content: value.data.to_vec(),
                der: value.to_der_vec().ok()?,
            });
        }
        rdns.push(attributes);
    }
    if rdns.is_empty() {
        return None;
    }
    Some(x500_name::rfc2253_name(&rdns))
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

    /// Subjects (DER) and the names OpenJDK 17.0.15 gives them:
    /// `new X500Principal(der).getName(X500Principal.RFC2253)`.
    const JDK_NAMES: &[(&str, &str)] = &[
        ("3010310e300c06035504031305612c4f3d62", r#"CN=a\,O\=b"#),
        (
            "3018310a3008060355040a130162310a30080603550403130161",
            r#"CN=a,O=b"#,
        ),
        (
            "30163114300806035504031301623008060355040a130161",
            r#"CN=b+O=a"#,
        ),
        (
            "301631143008060355040b1301613008060355040b13017a",
            r#"OU=a+OU=z"#,
        ),
        (
            "30163114300806032a03040c016130080603550403130178",
            r#"1.2.3.4=#0c0161+CN=x"#,
        ),
        (
            "301731153008060355040313017a3009060355040613025553",
            r#"CN=z+C=US"#,
        ),
        (
            "3012311030060601310c016230060601320c0161",
            r#"1.9=#0c0162+1.10=#0c0161"#,
        ),
        (
            "301b3119301706035504031310206c65616420616e6420747261696c20",
            r#"CN=\ lead and trail\ "#,
        ),
        (
            "301a3118301606035504030c0f613b623c633e6422655c663d672b68",
            r#"CN=a\;b\<c\>d\"e\\f\=g\+h"#,
        ),
        ("3010310e300c06035504030c05236c656164", r#"CN=\#lead"#),
        ("300d310b300906035504030c02780d", "CN=x\\\r"),
        ("300e310c300a06035504030c03610062", r#"CN=a\00b"#),
        ("3010310e300c06035504030c05c3a920c3bc", r#"CN=é ü"#),
        (
            "30163114301206092a864886f70d01090116056140622e63",
            r#"1.2.840.113549.1.9.1=#16056140622e63"#,
        ),
        (
            "300f310d300b060355040c1304626f7373",
            r#"2.5.4.12=#1304626f7373"#,
        ),
        ("300e310c300a06035504051303313233", r#"2.5.4.5=#1303313233"#),
        ("300f310d300b060355040913046d61696e", r#"STREET=main"#),
        (
            "301531133011060a0992268993f22c6401191603636f6d",
            r#"DC=com"#,
        ),
        ("301431123010060a0992268993f22c64010113027531", r#"UID=u1"#),
        (
            "3025310b3009060355040613025553310a30080603550408130173310a3008060355040713016c",
            r#"L=l,ST=s,C=US"#,
        ),
        ("300d310b3009060355040304026869", r#"CN=#04026869"#),
    ];

    #[test]
    fn subjects_are_named_as_the_jdk_names_them() {
        for (der, jdk) in JDK_NAMES {
            let der: Vec<u8> = (0..der.len())
                .step_by(2)
                .map(|at| u8::from_str_radix(&der[at..at + 2], 16).expect("hex"))
                .collect();
            let (_, name) =
                <X509Name as x509_parser::prelude::FromDer<_>>::from_der(&der).expect("subject");
            assert_eq!(
                subject_principal(&name).as_deref(),
                Some(*jdk),
                "{der:02x?}"
            );
        }
    }

    #[test]
    fn a_comma_inside_a_value_is_not_a_second_rdn() {
        let principal = |dn: rcgen::DistinguishedName| {
            let mut params =
                rcgen::CertificateParams::new(vec!["client".to_owned()]).expect("params");
            params.distinguished_name = dn;
            let key = rcgen::KeyPair::generate().expect("key");
            let certificate = params.self_signed(&key).expect("certificate");
            certificate_principal(certificate.der())
        };
        let mut two_rdns = rcgen::DistinguishedName::new();
        two_rdns.push(rcgen::DnType::OrganizationName, "b");
        two_rdns.push(rcgen::DnType::CommonName, "a");
        let mut one_cn = rcgen::DistinguishedName::new();
        one_cn.push(rcgen::DnType::CommonName, "a,O=b");
        assert_eq!(principal(two_rdns).as_deref(), Some("CN=a,O=b"));
        assert_eq!(principal(one_cn).as_deref(), Some(r"CN=a\,O\=b"));
    }

    #[test]
    fn unreadable_or_keyless_keystores_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = dir.path().join("missing.pem");
        let config = Config::default();
        let error = acceptor_with_keystore(&config, &missing)
            .err()
            .expect("missing file")
            .to_string();
        assert!(error.contains("missing.pem"), "{error}");

        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        let cert_only = dir.path().join("cert-only.pem");
        std::fs::write(&cert_only, certificate.pem()).expect("write");
        let error = acceptor_with_keystore(&config, &cert_only)
            .err()
            .expect("no key")
            .to_string();
        assert!(error.contains("private key"), "{error}");

        let both = dir.path().join("both.pem");
        std::fs::write(
            &both,
            format!("{}{}", certificate.pem(), key.serialize_pem()),
        )
        .expect("write");
        assert!(acceptor_with_keystore(&config, &both).is_ok());
    }
}
