//! AlterUserScramCredentials: Alter on the cluster (every user CLUSTER_AUTHORIZATION_FAILED
//! otherwise), then Kafka's `ScramControlManager` rules per user: a user named twice is
//! DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, an empty name or
//! iterations outside 4096..=16384 UNACCEPTABLE_CREDENTIAL, deleting a missing credential
//! RESOURCE_NOT_FOUND. The accepted changes are written to the metadata store together as salted
//! keys (StoredKey and ServerKey from the salted password; the password never reaches the
//! broker); every broker's SASL set follows the store's watch, so a deleted user's next login
//! fails everywhere.
//!
//! Must never: store a salted password itself (only the keys derived from it), or answer success
//! for a change the store did not take (REQUEST_TIMED_OUT then).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::security::{ScramRecord, SCRAM_USER_BYTES_MAX};

use super::common::security_admin;
use super::error_code;
use crate::cluster::security_store::scram_record;
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::sasl::credentials::{
    credential_from_salted_password, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
    SCRAM_SALT_BYTES_MAX,
};
use crate::security::sasl::ScramMechanism;
use crate::security::session::Session;

/// Kafka's SCRAM mechanism code (`ScramMechanism.type`): SCRAM-SHA-256 1, SCRAM-SHA-512 2.
pub(crate) fn mechanism_of_code(code: i8) -> Option<ScramMechanism> {
    match code {
        1 => Some(ScramMechanism::Sha256),
        2 => Some(ScramMechanism::Sha512),
        _ => None,
    }
}

/// What one request changes, and the users refused with their code and message.
#[derive(Debug, Default)]
struct Plan {
    deletions: Vec<(ScramMechanism, String)>,
    upsertions: Vec<ScramRecord>,
    refused: BTreeMap<String, (i16, &'static str)>,
}

const DUPLICATE: (i16, &str) = (
    error_code::DUPLICATE_RESOURCE,
    "A user credential cannot be altered twice in the same request",
);

/// Kafka's checks of one user name and mechanism code.
fn check_user(name: &str, mechanism: i8) -> Result<ScramMechanism, (i16, &'static str)> {
    let mechanism = mechanism_of_code(mechanism).ok_or((
        error_code::UNSUPPORTED_SASL_MECHANISM,
        "Unknown SCRAM mechanism",
    ))?;
    if name.is_empty() {
        return Err((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty",
        ));
    }
    if name.len() > SCRAM_USER_BYTES_MAX {
        return Err((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "Username is longer than Skiff stores (1024 bytes)",
        ));
    }
    Ok(mechanism)
}

/// Kafka's checks of one upsertion, and its stored record (keys derived from the salted
/// password).
fn check_upsertion(
    upsertion: &ScramCredentialUpsertion,
    name: &str,
) -> Result<ScramRecord, (i16, &'static str)> {
    let mechanism = check_user(name, upsertion.mechanism)?;
    let iterations = u32::try_from(upsertion.iterations).unwrap_or(0);
    if iterations < SCRAM_ITERATIONS_MIN {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Too few iterations"));
    }
    if iterations > SCRAM_ITERATIONS_MAX {
        return Err((error_code::UNACCEPTABLE_CREDENTIAL, "Too many iterations"));
    }
    if upsertion.salt.is_empty() || upsertion.salt.len() > SCRAM_SALT_BYTES_MAX {
        return Err((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "The salt must be 1 to 64 bytes",
        ));
    }
    if upsertion.salted_password.is_empty() {
        return Err((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "The salted password must not be empty",
        ));
    }
    let credential = credential_from_salted_password(
        mechanism,
        &upsertion.salted_password,
        &upsertion.salt,
        iterations,
    );
    Ok(scram_record(mechanism, name, &credential))
}

/// Applies Kafka's rules to `request` against the credentials `existing` (mechanism, user).
fn plan(
    request: &AlterUserScramCredentialsRequest,
    existing: &BTreeSet<(ScramMechanism, String)>,
) -> Plan {
    let mut plan = Plan::default();
    // One change per user and mechanism: a pair named twice refuses the user (Kafka's
    // DUPLICATE_RESOURCE); one user's two mechanisms are two changes.
    let mut seen = BTreeSet::new();
    for deletion in &request.deletions {
        let name = deletion.name.to_string();
        if !seen.insert((name.clone(), deletion.mechanism)) {
            plan.refused.insert(name, DUPLICATE);
            continue;
        }
        match check_user(&name, deletion.mechanism) {
            Ok(mechanism) if existing.contains(&(mechanism, name.clone())) => {
                plan.deletions.push((mechanism, name));
            }
            Ok(_) => {
                let missing = (
                    error_code::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                );
                plan.refused.entry(name).or_insert(missing);
            }
            Err(refusal) => {
                plan.refused.entry(name).or_insert(refusal);
            }
        }
    }
    for upsertion in &request.upsertions {
        let name = upsertion.name.to_string();
        if !seen.insert((name.clone(), upsertion.mechanism)) {
            plan.refused.insert(name, DUPLICATE);
            continue;
        }
        match check_upsertion(upsertion, &name) {
            Ok(record) => plan.upsertions.push(record),
            Err(refusal) => {
                plan.refused.entry(name).or_insert(refusal);
            }
        }
    }
    // A user refused for one change makes none of its changes.
    let refused = &plan.refused;
    plan.deletions
        .retain(|(_, user)| !refused.contains_key(user));
    plan.upsertions
        .retain(|record| !refused.contains_key(&record.user));
    plan
}

fn result(user: String, code: i16, message: Option<String>) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user))
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let users: BTreeSet<String> = request
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    let every = |code: i16, message: String| {
        let results = users
            .iter()
            .map(|user| result(user.clone(), code, Some(message.clone())))
            .collect();
        AlterUserScramCredentialsResponse::default().with_results(results)
    };
    if let Err(refusal) = security_admin::cluster_operation(ctx, session, header, Operation::Alter)
    {
        return every(refusal.code, refusal.message);
    }
    let existing = match ctx.security.stored_scram().await {
        Ok(stored) => stored
            .into_iter()
            .filter_map(|record| {
                ScramMechanism::from_name(&record.mechanism).map(|m| (m, record.user))
            })
            .collect(),
        Err(error) => return every(error_code::REQUEST_TIMED_OUT, error.to_string()),
    };
    let plan = plan(&request, &existing);
    let written = ctx
        .security
        .alter_scram(&plan.deletions, &plan.upsertions)
        .await;
    let changed: BTreeSet<String> = plan
        .deletions
        .iter()
        .map(|(_, user)| user.clone())
        .chain(plan.upsertions.iter().map(|record| record.user.clone()))
        .collect();
    let mut results: Vec<_> = changed
        .into_iter()
        .map(|user| match &written {
            Ok(()) => result(user, error_code::NONE, None),
            Err(error) => result(user, error_code::REQUEST_TIMED_OUT, Some(error.to_string())),
        })
        .collect();
    results.extend(
        plan.refused
            .into_iter()
            .map(|(user, (code, message))| result(user, code, Some(message.to_owned()))),
    );
    AlterUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"0123456789abcdef"))
            .with_salted_password(Bytes::from_static(&[7; 32]))
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_mechanism(mechanism)
    }

    #[test]
    fn kafkas_rules_per_user() {
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![delete("gone", 1), delete("old", 2), delete("bad", 9)])
            .with_upsertions(vec![
                upsert("alice", 1, 4096),
                upsert("few", 2, 4095),
                upsert("many", 2, 16385),
                upsert("", 1, 8192),
                upsert("old", 1, 4096),
                upsert("twice", 2, 8192),
                upsert("twice", 2, 8192),
                upsert("both", 1, 8192),
                upsert("both", 2, 8192),
            ]);
        let existing = BTreeSet::from([(ScramMechanism::Sha512, "old".to_owned())]);
        let plan = plan(&request, &existing);
        assert_eq!(plan.deletions, [(ScramMechanism::Sha512, "old".to_owned())]);
        let upserted: Vec<(&str, &str)> = plan
            .upsertions
            .iter()
            .map(|r| (r.user.as_str(), r.mechanism.as_str()))
            .collect();
        assert_eq!(
            upserted,
            [
                ("alice", "SCRAM-SHA-256"),
                ("old", "SCRAM-SHA-256"),
                ("both", "SCRAM-SHA-256"),
                ("both", "SCRAM-SHA-512")
            ]
        );
        let code = |user: &str| plan.refused.get(user).map(|(code, _)| *code);
        assert_eq!(code("gone"), Some(error_code::RESOURCE_NOT_FOUND));
        assert_eq!(code("bad"), Some(error_code::UNSUPPORTED_SASL_MECHANISM));
        assert_eq!(code("few"), Some(error_code::UNACCEPTABLE_CREDENTIAL));
        assert_eq!(code("many"), Some(error_code::UNACCEPTABLE_CREDENTIAL));
        assert_eq!(code(""), Some(error_code::UNACCEPTABLE_CREDENTIAL));
        // Deleting one mechanism of a user and setting another are two changes, both made.
        assert_eq!(code("old"), None);
        assert_eq!(code("twice"), Some(error_code::DUPLICATE_RESOURCE));
    }

    #[test]
    fn the_stored_keys_are_the_ones_a_login_checks() {
        use crate::security::sasl::credentials::credential_from_password;
        let salt = b"0123456789abcdef";
        let from_password = credential_from_password(ScramMechanism::Sha256, "pw", salt, 4096);
        // What kafka-configs.sh sends: Hi(password, salt, iterations).
        let salted = {
            let mut out = vec![0u8; 32];
            pbkdf2::pbkdf2_hmac::<sha2::Sha256>(b"pw", salt, 4096, &mut out);
            out
        };
        let request = AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![
                upsert("alice", 1, 4096).with_salted_password(Bytes::from(salted))
            ]);
        let plan = plan(&request, &BTreeSet::new());
        let expected = scram_record(ScramMechanism::Sha256, "alice", &from_password);
        assert_eq!(plan.upsertions, vec![expected]);
    }
}
