//! SaslHandshake (key 17, v0–v1): names the mechanism of the connection's SASL exchange. On a SASL
//! listener before authentication it starts the exchange; anywhere else (a PLAINTEXT or SSL
//! listener, or after authentication) it is answered ILLEGAL_SASL_STATE, as Kafka does.
//!
//! Must never: start an exchange outside the SASL gate, or list a mechanism that is not enabled.

use kafka_protocol::messages::{RequestHeader, SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::security::sasl::{scram, Authenticator, HandshakeError};

/// The answer, and whether the connection must close after it.
pub(crate) fn handle(
    authenticator: Option<&mut Authenticator>,
    header: &RequestHeader,
    request: SaslHandshakeRequest,
) -> (SaslHandshakeResponse, bool) {
    let Some(authenticator) = authenticator else {
        return (
            SaslHandshakeResponse::default().with_error_code(error_code::ILLEGAL_SASL_STATE),
            false,
        );
    };
    let mechanisms = authenticator
        .enabled_names()
        .into_iter()
        .map(StrBytes::from_static_str)
        .collect();
    let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
    match authenticator.handshake(
        header.request_api_version,
        request.mechanism.as_str(),
        scram::fresh_nonce(),
    ) {
        Ok(_) => (response.with_error_code(error_code::NONE), false),
        Err(HandshakeError::UnsupportedMechanism(name)) => {
            tracing::debug!(mechanism = %name, "SASL mechanism not enabled");
            (
                response.with_error_code(error_code::UNSUPPORTED_SASL_MECHANISM),
                true,
            )
        }
        Err(HandshakeError::IllegalState) => (
            response.with_error_code(error_code::ILLEGAL_SASL_STATE),
            true,
        ),
        Err(error) => {
            tracing::debug!(%error, "SASL handshake refused");
            (
                response.with_error_code(error_code::SASL_AUTHENTICATION_FAILED),
                true,
            )
        }
    }
}
