//! AlterUserScramCredentials (key 51) and DescribeUserScramCredentials (key 50) request decoding,
//! version 0 (flexible), the only version Kafka has.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest,
};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::SCRAM_USERS_PER_REQUEST_MAX;

pub(crate) fn decode_alter<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AlterUserScramCredentialsRequest, DecodeError> {
    let c = flexible(ApiKey::AlterUserScramCredentials, version);
    let tags_min = usize::from(c);
    let mut m = AlterUserScramCredentialsRequest::default();
    let deletion_bytes_min = string_bytes_min(c) + 1 + tags_min;
    m.deletions = array(s, c, deletion_bytes_min, SCRAM_USERS_PER_REQUEST_MAX, |s| {
        let mut deletion = ScramCredentialDeletion::default();
        deletion.name = s.string(c)?;
        deletion.mechanism = s.i8()?;
        if c {
            deletion.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(deletion)
    })?;
    let upsertion_bytes_min = string_bytes_min(c) + 1 + 4 + 2 * array_bytes_min(c) + tags_min;
    m.upsertions = array(
        s,
        c,
        upsertion_bytes_min,
        SCRAM_USERS_PER_REQUEST_MAX,
        |s| {
            let mut upsertion = ScramCredentialUpsertion::default();
            upsertion.name = s.string(c)?;
            upsertion.mechanism = s.i8()?;
            upsertion.iterations = s.i32()?;
            upsertion.salt = s.bytes(c)?;
            upsertion.salted_password = s.bytes(c)?;
            if c {
                upsertion.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(upsertion)
        },
    )?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}

pub(crate) fn decode_describe<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeUserScramCredentialsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeUserScramCredentials, version);
    let mut m = DescribeUserScramCredentialsRequest::default();
    let user_bytes_min = string_bytes_min(c) + usize::from(c);
    m.users = nullable_array(s, c, user_bytes_min, SCRAM_USERS_PER_REQUEST_MAX, |s| {
        let mut user = UserName::default();
        user.name = s.string(c)?;
        if c {
            user.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(user)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
