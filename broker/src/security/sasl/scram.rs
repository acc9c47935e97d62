//! SCRAM-SHA-256 and SCRAM-SHA-512 on the server (RFC 5802, RFC 7677): client-first → server-first
//! (combined nonce, salt, iterations) → client-final (channel binding, nonce, proof) →
//! server-final (`v=` ServerSignature).
//!
//! Channel binding is not offered: a gs2 header asking for it (`p=`) is refused; `n` and `y` are
//! accepted. Extensions in client-first (Kafka's `tokenauth=...`) are ignored except a mandatory
//! one (`m=`), which is refused as RFC 5802 requires.
//!
//! Must never: decide an unknown user's failure before the proof check (the fake credential from
//! [`CredentialStore::lookup`] goes through the same steps), or accept any message once the
//! exchange has succeeded or failed.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use rand::RngCore as _;

use super::credentials::{CredentialStore, ScramCredential};
use super::{check_size, crypto, SaslError, SaslStep};

/// Random bytes in a server nonce (before base64).
pub const SERVER_NONCE_BYTES: usize = 24;

/// The SCRAM hash functions served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (RFC 7677).
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name`, if served.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(Self::Sha256),
            "SCRAM-SHA-512" => Some(Self::Sha512),
            _ => None,
        }
    }

    /// Bytes of the hash output (and of StoredKey, ServerKey, proofs and signatures).
    pub fn key_bytes(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Sha512 => 64,
        }
    }
}

/// A fresh server nonce from the thread's CSPRNG, in lowercase hex: SCRAM allows any printable
/// character but a comma, yet librdkafka cuts a nonce at '=' (base64 padding made its SCRAM fail
/// with a nonce mismatch), and Kafka's own nonces are alphanumeric too.
pub fn fresh_nonce() -> String {
    let mut bytes = [0u8; SERVER_NONCE_BYTES];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

enum State {
    AwaitClientFirst,
    AwaitClientFinal(Box<Pending>),
    Finished,
}

/// What the client's final message is checked against.
struct Pending {
    user: String,
    known: bool,
    credential: ScramCredential,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

/// One SCRAM exchange on the server side.
pub struct ScramServer {
    mechanism: ScramMechanism,
    store: Arc<CredentialStore>,
    server_nonce: String,
    state: State,
}

impl ScramServer {
    /// Starts an exchange. `server_nonce` must be fresh and printable without commas
    /// ([`fresh_nonce`]).
    pub fn new(
        mechanism: ScramMechanism,
        store: Arc<CredentialStore>,
        server_nonce: String,
    ) -> Self {
        Self {
            mechanism,
            store,
            server_nonce,
            state: State::AwaitClientFirst,
        }
    }

    /// Feeds the client's next message. Any error ends the exchange: later messages get
    /// [`SaslError::Finished`].
    pub fn step(&mut self, message: &[u8]) -> Result<SaslStep, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        check_size(message)?;
        let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
        match state {
            State::AwaitClientFirst => self.client_first(text),
            State::AwaitClientFinal(pending) => self.client_final(text, *pending),
            State::Finished => Err(SaslError::Finished),
        }
    }

    fn client_first(&mut self, text: &str) -> Result<SaslStep, SaslError> {
        // gs2-header = gs2-cbind-flag "," [ authzid ] ","
        let (flag, rest) = text
            .split_once(',')
            .ok_or(SaslError::Malformed("no gs2 header"))?;
        match flag {
            "n" | "y" => {}
            _ => return Err(SaslError::Malformed("channel binding not supported")),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or(SaslError::Malformed("no gs2 header"))?;
        if !authzid.is_empty() && !authzid.starts_with("a=") {
            return Err(SaslError::Malformed("bad authzid"));
        }
        let mut fields = bare.split(',');
        let user_field = fields.next().unwrap_or_default();
        if user_field.starts_with("m=") {
            return Err(SaslError::Malformed("mandatory extension not supported"));
        }
        let user = decode_saslname(
            user_field
                .strip_prefix("n=")
                .ok_or(SaslError::Malformed("no user name"))?,
        )?;
        let client_nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .ok_or(SaslError::Malformed("no client nonce"))?;
        if client_nonce.is_empty() || !client_nonce.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
            return Err(SaslError::Malformed("bad client nonce"));
        }
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if decode_saslname(authzid)? != user {
                return Err(SaslError::AuthenticationFailed);
            }
        }
        let (credential, known) = self.store.lookup(self.mechanism, &user);
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        self.state = State::AwaitClientFinal(Box::new(Pending {
            user,
            known,
            credential,
            gs2_header: format!("{flag},{authzid},"),
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
        }));
        Ok(SaslStep::Challenge(server_first.into_bytes()))
    }

    fn client_final(&self, text: &str, expected: Pending) -> Result<SaslStep, SaslError> {
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(SaslError::Malformed("no proof"))?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|field| field.strip_prefix("c="))
            .ok_or(SaslError::Malformed("no channel binding"))?;
        let nonce = fields
            .next()
            .and_then(|field| field.strip_prefix("r="))
            .ok_or(SaslError::Malformed("no nonce"))?;
        let binding = BASE64
            .decode(binding)
            .map_err(|_| SaslError::Malformed("bad channel binding base64"))?;
        if binding != expected.gs2_header.as_bytes() {
            return Err(SaslError::Malformed(
                "channel binding does not match the gs2 header",
            ));
        }
        // RFC 5802 wants the nonce echoed as sent, but librdkafka sends its client nonce again in
        // front of it; Kafka accepts any final nonce that ends with the one it issued, and so do we
        // (the server part, which makes the exchange fresh, is still required).
        if !nonce.ends_with(expected.nonce.as_str()) {
            return Err(SaslError::NonceMismatch);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| SaslError::Malformed("bad proof base64"))?;
        if proof.len() != self.mechanism.key_bytes() {
            return Err(SaslError::Malformed("proof of the wrong length"));
        }
        let auth_message = format!(
            "{},{},{without_proof}",
            expected.client_first_bare, expected.server_first
        );
        let credential = &expected.credential;
        let client_signature = crypto::hmac(
            self.mechanism,
            &credential.stored_key,
            auth_message.as_bytes(),
        );
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        let matches = crypto::equal_constant_time(
            &crypto::hash(self.mechanism, &client_key),
            &credential.stored_key,
        );
        // Computed for unknown users too, so success and failure cost the same.
        let server_signature = crypto::hmac(
            self.mechanism,
            &credential.server_key,
            auth_message.as_bytes(),
        );
        if matches & expected.known {
            Ok(SaslStep::Success {
                principal: expected.user,
                final_message: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
            })
        } else {
            Err(SaslError::AuthenticationFailed)
        }
    }
}

/// Decodes a SCRAM `saslname`: `=2C` is a comma, `=3D` an equals sign; any other `=` is malformed.
fn decode_saslname(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(SaslError::Malformed("bad escape in user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(SaslError::Malformed("empty user name"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::credentials::{credential_from_password, credential_line};
    use crate::security::sasl::SASL_MESSAGE_BYTES_MAX;

    // RFC 7677 section 3's example exchange (user "user", password "pencil").
    const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    const RFC_SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                    p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    const SECRET: &[u8] = b"server secret";

    fn rfc_store() -> Arc<CredentialStore> {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = credential_from_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
        CredentialStore::parse(
            &credential_line(ScramMechanism::Sha256, "user", &credential),
            SECRET,
        )
        .map(Arc::new)
        .unwrap()
    }

    fn rfc_server(store: &Arc<CredentialStore>) -> ScramServer {
        ScramServer::new(
            ScramMechanism::Sha256,
            store.clone(),
            RFC_SERVER_NONCE.into(),
        )
    }

    /// A client computing its final message, for round trips beyond the RFC's vector.
    fn client_final(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        client_final_with_nonce_prefix(mechanism, password, client_first_bare, server_first, "")
    }

    /// As [`client_final`], with `prefix` before the echoed nonce (librdkafka repeats its own).
    fn client_final_with_nonce_prefix(
        mechanism: ScramMechanism,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
        prefix: &str,
    ) -> String {
        let mut parts = server_first.split(',');
        let nonce = parts.next().unwrap().strip_prefix("r=").unwrap();
        let salt = BASE64
            .decode(parts.next().unwrap().strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = parts
            .next()
            .unwrap()
            .strip_prefix("i=")
            .unwrap()
            .parse()
            .unwrap();
        let salted = crypto::salted_password(mechanism, password.as_bytes(), &salt, iterations);
        let client_key = crypto::hmac(mechanism, &salted, b"Client Key");
        let stored_key = crypto::hash(mechanism, &client_key);
        let without_proof = format!("c=biws,r={prefix}{nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = crypto::hmac(mechanism, &stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    #[test]
    fn rfc_7677_test_vector() {
        let store = rfc_store();
        let mut server = rfc_server(&store);
        assert_eq!(
            server.step(RFC_CLIENT_FIRST.as_bytes()),
            Ok(SaslStep::Challenge(RFC_SERVER_FIRST.as_bytes().to_vec()))
        );
        assert_eq!(
            server.step(RFC_CLIENT_FINAL.as_bytes()),
            Ok(SaslStep::Success {
                principal: "user".into(),
                final_message: RFC_SERVER_FINAL.as_bytes().to_vec()
            })
        );
        // A replay of the final message on the finished exchange.
        assert_eq!(
            server.step(RFC_CLIENT_FINAL.as_bytes()),
            Err(SaslError::Finished)
        );
    }

    #[test]
    fn librdkafka_style_final_nonce_with_the_client_nonce_repeated_is_accepted() {
        let store = rfc_store();
        let mut server = rfc_server(&store);
        let SaslStep::Challenge(first) = server.step(RFC_CLIENT_FIRST.as_bytes()).unwrap() else {
            panic!("no challenge");
        };
        let first = String::from_utf8(first).unwrap();
        let bare = RFC_CLIENT_FIRST.strip_prefix("n,,").unwrap();
        let last = client_final_with_nonce_prefix(
            ScramMechanism::Sha256,
            "pencil",
            bare,
            &first,
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert!(matches!(
            server.step(last.as_bytes()),
            Ok(SaslStep::Success { .. })
        ));
    }

    #[test]
    fn replayed_final_message_on_a_new_exchange_fails_on_the_nonce() {
        let store = rfc_store();
        let mut server = ScramServer::new(ScramMechanism::Sha256, store.clone(), fresh_nonce());
        assert!(matches!(
            server.step(RFC_CLIENT_FIRST.as_bytes()),
            Ok(SaslStep::Challenge(_))
        ));
        assert_eq!(
            server.step(RFC_CLIENT_FINAL.as_bytes()),
            Err(SaslError::NonceMismatch)
        );
    }

    #[test]
    fn sha512_round_trip_wrong_password_and_unknown_user_look_alike() {
        let credential =
            credential_from_password(ScramMechanism::Sha512, "right", b"0123456789abcdef", 4096);
        let store = CredentialStore::parse(
            &credential_line(ScramMechanism::Sha512, "alice", &credential),
            SECRET,
        )
        .map(Arc::new)
        .unwrap();
        let mut outcomes = Vec::new();
        for (user, password) in [("alice", "right"), ("alice", "wrong"), ("nobody", "right")] {
            let mut server = ScramServer::new(ScramMechanism::Sha512, store.clone(), fresh_nonce());
            let bare = format!("n={user},r=clientnonce");
            let SaslStep::Challenge(first) = server.step(format!("n,,{bare}").as_bytes()).unwrap()
            else {
                panic!("no challenge");
            };
            let first = String::from_utf8(first).unwrap();
            assert!(first.ends_with(",i=4096"), "{first}");
            let last = client_final(ScramMechanism::Sha512, password, &bare, &first);
            outcomes.push(server.step(last.as_bytes()));
        }
        assert!(matches!(
            &outcomes[0],
            Ok(SaslStep::Success { principal, final_message })
                if principal == "alice" && final_message.starts_with(b"v=")
        ));
        assert_eq!(outcomes[1], Err(SaslError::AuthenticationFailed));
        assert_eq!(outcomes[2], Err(SaslError::AuthenticationFailed));
    }

    #[test]
    fn hostile_client_first_messages() {
        let store = rfc_store();
        for message in [
            "",
            "n",
            "n,,",
            "p=tls-unique,,n=user,r=abc",
            "x,,n=user,r=abc",
            "n,,m=ext,n=user,r=abc",
            "n,,n=,r=abc",
            "n,,n=us=er,r=abc",
            "n,,n=user",
            "n,,n=user,r=",
            "n,,n=user,x=abc",
            "n,b=x,n=user,r=abc",
        ] {
            let mut server = rfc_server(&store);
            assert!(
                matches!(
                    server.step(message.as_bytes()),
                    Err(SaslError::Malformed(_))
                ),
                "{message:?}"
            );
            assert_eq!(server.step(message.as_bytes()), Err(SaslError::Finished));
        }
        let mut server = rfc_server(&store);
        assert!(matches!(
            server.step(b"n,,n=user,r=\xff"),
            Err(SaslError::Malformed(_))
        ));
        let mut server = rfc_server(&store);
        let huge = format!("n,,n=user,r={}", "a".repeat(SASL_MESSAGE_BYTES_MAX));
        assert!(matches!(
            server.step(huge.as_bytes()),
            Err(SaslError::TooLarge { .. })
        ));
        let mut server = rfc_server(&store);
        assert_eq!(
            server.step(b"n,a=other,n=user,r=abc"),
            Err(SaslError::AuthenticationFailed)
        );
        let mut server = rfc_server(&store);
        assert!(matches!(
            server.step(b"n,,n=a=2Cb=3Dc,r=abc"),
            Ok(SaslStep::Challenge(_))
        ));
    }

    #[test]
    fn hostile_client_final_messages() {
        let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let cases = [
            (format!("c=biws,r={nonce}"), "no proof"),
            (format!("c=biws,r={nonce},p=!!notbase64!!"), "bad base64"),
            (format!("c=biws,r={nonce},p=AAAA"), "short proof"),
            (format!("c=%%%,r={nonce},{proof}"), "bad binding base64"),
            (
                format!("c=eSws,r={nonce},{proof}"),
                "binding not the header",
            ),
            (format!("r={nonce},{proof}"), "no binding"),
            (format!("c=biws,{proof}"), "no nonce"),
        ];
        let store = rfc_store();
        for (message, why) in cases {
            let mut server = rfc_server(&store);
            server.step(RFC_CLIENT_FIRST.as_bytes()).unwrap();
            assert!(
                matches!(
                    server.step(message.as_bytes()),
                    Err(SaslError::Malformed(_))
                ),
                "{why}: {message}"
            );
        }
        let mut server = rfc_server(&store);
        server.step(RFC_CLIENT_FIRST.as_bytes()).unwrap();
        assert_eq!(
            server.step(format!("c=biws,r={nonce}XX,{proof}").as_bytes()),
            Err(SaslError::NonceMismatch)
        );
        // A proof with one bit flipped.
        let mut server = rfc_server(&store);
        server.step(RFC_CLIENT_FIRST.as_bytes()).unwrap();
        let flipped = RFC_CLIENT_FINAL.replace("p=dHzb", "p=dHzc");
        assert_eq!(
            server.step(flipped.as_bytes()),
            Err(SaslError::AuthenticationFailed)
        );
    }

    #[test]
    fn mechanism_names_round_trip() {
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            assert_eq!(ScramMechanism::from_name(mechanism.name()), Some(mechanism));
        }
        assert_eq!(ScramMechanism::from_name("PLAIN"), None);
    }
}
