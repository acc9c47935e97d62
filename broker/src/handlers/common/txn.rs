//! What the transaction APIs' handlers share: their hand-off to the transaction coordinator's task
//! and the error code an older client version gets in place of PRODUCER_FENCED.
//!
//! Must never: decide a transaction's outcome (skiff-txn's).

use skiff_protocol::error_code::ErrorCode;
use skiff_txn::Response;

use crate::context::Ctx;
use crate::txn::driver::TxnRequest;

/// The code answered to a client at `version` of an API whose first version that knows
/// PRODUCER_FENCED is `fenced_version_min`: older clients get INVALID_PRODUCER_EPOCH, as Kafka
/// answers them (KIP-588).
pub(crate) fn for_version(code: ErrorCode, version: i16, fenced_version_min: i16) -> i16 {
    if code == ErrorCode::PRODUCER_FENCED && version < fenced_version_min {
        ErrorCode::INVALID_PRODUCER_EPOCH.code()
    } else {
        code.code()
    }
}

/// Sends `request` to the coordinator task; `None` when it has stopped (the handler answers
/// COORDINATOR_NOT_AVAILABLE, which clients retry).
pub(crate) async fn call(ctx: &Ctx, version: i16, request: TxnRequest) -> Option<Response> {
    ctx.txns.call(version, request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_versions_get_invalid_producer_epoch_for_a_fenced_producer() {
        assert_eq!(
            for_version(ErrorCode::PRODUCER_FENCED, 1, 2),
            ErrorCode::INVALID_PRODUCER_EPOCH.code()
        );
        assert_eq!(
            for_version(ErrorCode::PRODUCER_FENCED, 2, 2),
            ErrorCode::PRODUCER_FENCED.code()
        );
        assert_eq!(for_version(ErrorCode::NONE, 0, 2), 0);
    }
}
