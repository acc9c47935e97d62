//! Fuzz bodies for the parsers that live in the broker crate (skiff-broker): what a SASL client
//! sends, the ACL file and the TOML config.
//!
//! `sasl_bare`: the first byte picks PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the rest is a stream
//! of bare size-prefixed tokens, as a 0.10-era client sends them after a v0 SaslHandshake, cut with
//! the broker's own framing (`skiff_protocol::frame`) and fed to one connection's
//! `Authenticator`. Asserts: the handshake selects bare framing; a token over
//! `SASL_MESSAGE_BYTES_MAX` is refused by size; SCRAM's challenge echoes the client nonce followed
//! by the server's and carries a salt and an iteration count; after any error the exchange is over
//! for good (`Finished`); PLAIN authenticates only the known user with the right password, and
//! SCRAM never authenticates a proof the harness did not compute from the password (the fuzzer
//! cannot forge one).
//!
//! `acl_file`: the input is read as an ACL file. Accepted files stay within the size bound, and
//! every ACL, written back with `format_acl`, parses to itself (alone and as a whole file).
//!
//! `config_toml`: the input is read as a broker TOML config with Kafka keys. An accepted file
//! validates or is refused without a panic; every key it set, written back as a TOML string from
//! `Config::value_text`, loads into a fresh config with the same value for every key.

use std::sync::{Arc, OnceLock};

use skiff_broker::config::{self, Config};
use skiff_broker::security::acl::file::{format_acl, parse as parse_acl_file};
use skiff_broker::security::sasl::credentials::{credential_from_password, credential_line};
use skiff_broker::security::sasl::{
    Authenticator, CredentialStore, Mechanism, SaslError, ScramMechanism, TokenFraming,
    TokenOutcome, SASL_MESSAGE_BYTES_MAX,
};
use skiff_protocol::frame;

/// Targets of this module.
pub const TARGETS: &[crate::Target] = &[
    ("sasl_bare", sasl_bare),
    ("acl_file", acl_file),
    ("config_toml", config_toml),
];

/// The one user the harness's credential store knows, and its password.
pub const SASL_USER: &str = "alice";
/// `SASL_USER`'s password.
pub const SASL_PASSWORD: &str = "secret";
/// The server nonce of every harness exchange: fixed, so an input replays the same way.
pub const SASL_SERVER_NONCE: &str = "fuzzservernonce";
/// Bare tokens are cut with this body limit: twice the SASL bound, so oversized tokens reach the
/// authenticator's own size check as they would behind a larger `socket.request.max.bytes`.
const BARE_TOKEN_FRAME_BYTES_MAX: usize = 2 * SASL_MESSAGE_BYTES_MAX;

fn credential_store() -> Arc<CredentialStore> {
    static STORE: OnceLock<Arc<CredentialStore>> = OnceLock::new();
    STORE
        .get_or_init(|| {
            let mut text = String::new();
            for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
                let credential =
                    credential_from_password(mechanism, SASL_PASSWORD, b"fuzz-salt-16byte", 4096);
                text.push_str(&credential_line(mechanism, SASL_USER, &credential));
                text.push('\n');
            }
            Arc::new(CredentialStore::parse(&text, b"fuzz server secret").expect("store parses"))
        })
        .clone()
}

pub fn sasl_bare(data: &[u8]) {
    let Some((&selector, mut stream)) = data.split_first() else {
        return;
    };
    let mechanism = match selector % 3 {
        0 => Mechanism::Plain,
        1 => Mechanism::Scram(ScramMechanism::Sha256),
        _ => Mechanism::Scram(ScramMechanism::Sha512),
    };
    let mut auth = Authenticator::new(
        credential_store(),
        vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha256),
            Mechanism::Scram(ScramMechanism::Sha512),
        ],
    );
    let framing = auth
        .handshake(0, mechanism.name(), SASL_SERVER_NONCE.to_owned())
        .expect("an enabled mechanism is accepted");
    assert_eq!(framing, TokenFraming::Bare);
    let mut failed = false;
    let mut client_nonce: Option<String> = None;
    while let Some(token) = frame::body(stream, BARE_TOKEN_FRAME_BYTES_MAX) {
        stream = &stream[4 + token.len()..];
        let expected_before = auth.expected_token();
        let outcome = auth.token(token);
        if failed || expected_before.is_none() {
            assert_eq!(outcome, Err(SaslError::Finished), "nothing after the end");
            continue;
        }
        assert_eq!(expected_before, Some(TokenFraming::Bare));
        if token.len() > SASL_MESSAGE_BYTES_MAX {
            assert!(
                matches!(outcome, Err(SaslError::TooLarge { .. })),
                "an oversized token is refused by size: {outcome:?}"
            );
        }
        match outcome {
            Err(_) => {
                failed = true;
                assert_eq!(auth.expected_token(), None);
                assert!(!auth.is_authenticated());
            }
            Ok(TokenOutcome::Challenge(challenge)) => {
                assert!(
                    matches!(mechanism, Mechanism::Scram(_)),
                    "PLAIN has one step"
                );
                assert!(client_nonce.is_none(), "SCRAM challenges once");
                let text = std::str::from_utf8(&challenge).expect("challenge is text");
                let token_text = std::str::from_utf8(token).expect("accepted token is text");
                let sent = token_text
                    .split(',')
                    .find_map(|field| field.strip_prefix("r="))
                    .expect("accepted client-first has a nonce");
                let nonce = format!("{sent}{SASL_SERVER_NONCE}");
                assert!(
                    text.starts_with(&format!("r={nonce},s=")),
                    "challenge echoes the nonces: {text}"
                );
                assert!(text.contains(",i=4096"), "{text}");
                assert_eq!(auth.expected_token(), Some(TokenFraming::Bare));
                client_nonce = Some(nonce);
            }
            Ok(TokenOutcome::Authenticated {
                user,
                final_message,
            }) => {
                assert!(auth.is_authenticated());
                assert_eq!(user, SASL_USER);
                match mechanism {
                    Mechanism::Plain => {
                        let mut parts = token.split(|byte| *byte == 0);
                        let authzid = parts.next().expect("authzid");
                        assert!(authzid.is_empty() || authzid == SASL_USER.as_bytes());
                        assert_eq!(parts.next(), Some(SASL_USER.as_bytes()));
                        assert_eq!(parts.next(), Some(SASL_PASSWORD.as_bytes()));
                        assert!(final_message.is_empty());
                    }
                    Mechanism::Scram(_) => panic!("a SCRAM proof was forged: {token:?}"),
                }
            }
        }
    }
}

pub fn acl_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(acls) = parse_acl_file(text) else {
        return;
    };
    let mut rewritten = String::new();
    for acl in &acls {
        let line = format_acl(acl);
        assert!(!line.contains('\n'), "one line per ACL: {line:?}");
        let again = parse_acl_file(&line).unwrap_or_else(|error| {
            panic!("formatted ACL {line:?} does not parse: {error}");
        });
        assert_eq!(
            again,
            vec![acl.clone()],
            "{line:?} parses back to the same ACL"
        );
        rewritten.push_str(&line);
        rewritten.push('\n');
    }
    assert_eq!(
        parse_acl_file(&rewritten).expect("rewritten file parses"),
        acls
    );
}

pub fn config_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut loaded = Config::default();
    if loaded.apply_toml(text).is_err() {
        return;
    }
    // Bounds and relations: an error or a pass, never a panic.
    let _ = loaded.validate();
    let _ = loaded.listener_configs();
    let mut table = toml::Table::new();
    for key in &loaded.explicitly_set {
        let value = loaded
            .value_text(key)
            .expect("a key the loader set is known")
            .unwrap_or_default();
        table.insert(key.clone(), toml::Value::String(value));
    }
    let rewritten = toml::to_string(&table).expect("a table of strings serialises");
    let mut reloaded = Config::default();
    reloaded
        .apply_toml(&rewritten)
        .unwrap_or_else(|error| panic!("rewritten config {rewritten:?} does not load: {error}"));
    for (key, _, _) in config::keys() {
        assert_eq!(
            reloaded.value_text(key),
            loaded.value_text(key),
            "{key} after writing back {rewritten:?}"
        );
    }
}
