//! DescribeUserScramCredentials: Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED
//! otherwise), then each user's mechanisms and iterations as Kafka's `ScramImage.describe`
//! answers: every user when none is named, RESOURCE_NOT_FOUND for a named user without
//! credentials, DUPLICATE_RESOURCE for a user named twice. Read from the metadata store
//! (REQUEST_TIMED_OUT when it does not answer).
//!
//! Must never: answer a salt or a key (only mechanisms and iteration counts leave the broker).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::security::ScramRecord;

use super::common::security_admin;
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// Kafka's mechanism code of a stored mechanism name.
fn mechanism_code(name: &str) -> i8 {
    match name {
        "SCRAM-SHA-256" => 1,
        "SCRAM-SHA-512" => 2,
        _ => 0,
    }
}

/// The answer for `users` (`None` or empty: every user) over the stored credentials.
fn describe(
    users: Option<Vec<String>>,
    stored: &[ScramRecord],
) -> Vec<DescribeUserScramCredentialsResult> {
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for record in stored {
        by_user.entry(&record.user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(mechanism_code(&record.mechanism))
                .with_iterations(i32::try_from(record.iterations).unwrap_or(i32::MAX)),
        );
    }
    let named: Vec<(String, bool)> = match users {
        Some(users) if !users.is_empty() => {
            let mut counted: BTreeMap<String, bool> = BTreeMap::new();
            for user in users {
                counted
                    .entry(user)
                    .and_modify(|twice| *twice = true)
                    .or_insert(false);
            }
            counted.into_iter().collect()
        }
        _ => by_user
            .keys()
            .map(|user| ((*user).to_owned(), false))
            .collect(),
    };
    named
        .into_iter()
        .map(|(user, twice)| {
            let result =
                DescribeUserScramCredentialsResult::default().with_user(StrBytes::from_string(user.clone()));
            if twice {
                return result
                    .with_error_code(error_code::DUPLICATE_RESOURCE)
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))));
            }
            match by_user.get(user.as_str()) {
                Some(infos) => result.with_credential_infos(infos.clone()),
                None => result
                    .with_error_code(error_code::RESOURCE_NOT_FOUND)
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "attemptToDescribeUserThatDoesNotExist: {user}"
                    )))),
            }
        })
        .collect()
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let refused = |code: i16, message: String| {
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if let Err(refusal) =
        security_admin::cluster_operation(ctx, session, header, Operation::Describe)
    {
        return refused(refusal.code, refusal.message);
    }
    let stored = match ctx.security.stored_scram().await {
        Ok(stored) => stored,
        Err(error) => return refused(error_code::REQUEST_TIMED_OUT, error.to_string()),
    };
    let users = request.users.map(|users| {
        users
            .into_iter()
            .map(|user| user.name.to_string())
            .collect()
    });
    DescribeUserScramCredentialsResponse::default().with_results(describe(users, &stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(user: &str, mechanism: &str) -> ScramRecord {
        ScramRecord {
            user: user.to_owned(),
            mechanism: mechanism.to_owned(),
            iterations: 8192,
            salt: String::new(),
            stored_key: String::new(),
            server_key: String::new(),
        }
    }

    #[test]
    fn users_are_described_as_kafka_does() {
        let stored = [
            record("alice", "SCRAM-SHA-256"),
            record("alice", "SCRAM-SHA-512"),
            record("bob", "SCRAM-SHA-512"),
        ];
        let all = describe(None, &stored);
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].credential_infos.len(), 2);
        let named = describe(
            Some(vec![
                "bob".into(),
                "carol".into(),
                "alice".into(),
                "alice".into(),
            ]),
            &stored,
        );
        let codes: Vec<(String, i16)> = named
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                ("alice".to_owned(), error_code::DUPLICATE_RESOURCE),
                ("bob".to_owned(), error_code::NONE),
                ("carol".to_owned(), error_code::RESOURCE_NOT_FOUND)
            ]
        );
        assert_eq!(named[1].credential_infos[0].mechanism, 2);
        assert_eq!(named[1].credential_infos[0].iterations, 8192);
    }
}
