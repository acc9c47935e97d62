//! SaslAuthenticate (key 36, v0–v2) and the bare tokens that 0.10-era clients send after a v0
//! SaslHandshake: one step of the connection's SASL exchange each. A failure is answered
//! SASL_AUTHENTICATION_FAILED (bare tokens: no answer, the client cannot read one) and the
//! connection closes; the message never says whether the user exists.
//!
//! Must never: answer a token outside an exchange other than ILLEGAL_SASL_STATE, or tell an unknown
//! user from a wrong password.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::security::sasl::{Authenticator, SaslError, TokenFraming, TokenOutcome};

/// What a step did to the connection.
pub(crate) enum Effect {
    /// The exchange goes on (or the request was refused without harm).
    Continue,
    /// The exchange succeeded for this user.
    Authenticated(String),
    /// Close after the answer.
    Close,
}

/// Kafka's wording, which says nothing about which part was wrong.
const FAILED_MESSAGE: &str = "Authentication failed: invalid credentials";

pub(crate) fn handle(
    authenticator: Option<&mut Authenticator>,
    _header: &RequestHeader,
    request: SaslAuthenticateRequest,
) -> (SaslAuthenticateResponse, Effect) {
    let illegal =
        SaslAuthenticateResponse::default().with_error_code(error_code::ILLEGAL_SASL_STATE);
    let Some(authenticator) = authenticator else {
        return (illegal, Effect::Continue);
    };
    if authenticator.expected_token() != Some(TokenFraming::SaslAuthenticate) {
        return (illegal, Effect::Close);
    }
    match authenticator.token(&request.auth_bytes) {
        Ok(TokenOutcome::Challenge(challenge)) => (
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(challenge)),
            Effect::Continue,
        ),
        Ok(TokenOutcome::Authenticated {
            user,
            final_message,
        }) => (
            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(final_message)),
            Effect::Authenticated(user),
        ),
        Err(error) => {
            log_failure(&error);
            (
                SaslAuthenticateResponse::default()
                    .with_error_code(error_code::SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_static_str(FAILED_MESSAGE))),
                Effect::Close,
            )
        }
    }
}

/// One bare token after a v0 handshake: the size-prefixed answer to write, or `None` to close
/// without one.
pub(crate) fn bare_token(
    authenticator: &mut Authenticator,
    token: &[u8],
) -> (Option<Bytes>, Effect) {
    let framed = |message: &[u8]| {
        let mut out = BytesMut::with_capacity(4 + message.len());
        // Messages are bounded by SASL_MESSAGE_BYTES_MAX, far below i32::MAX.
        out.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
        out.put_slice(message);
        out.freeze()
    };
    match authenticator.token(token) {
        Ok(TokenOutcome::Challenge(challenge)) => (Some(framed(&challenge)), Effect::Continue),
        Ok(TokenOutcome::Authenticated {
            user,
            final_message,
        }) => (Some(framed(&final_message)), Effect::Authenticated(user)),
        Err(error) => {
            log_failure(&error);
            (None, Effect::Close)
        }
    }
}

fn log_failure(error: &SaslError) {
    tracing::info!(%error, "SASL authentication failed");
}
