//! Error-code mapping shared by handlers: what a storage error means on the wire.
//!
//! Must never: decide anything but the code (handlers decide whether to answer or retry).

use super::super::error_code;

/// Maps a storage error to Produce's error codes.
pub(crate) fn storage_error_code(error: &skiff_storage::Error) -> i16 {
    match error {
        skiff_storage::Error::BatchTooLarge { .. } => error_code::RECORD_LIST_TOO_LARGE,
        skiff_storage::Error::InvalidBatch(record_error) => record_error.error_code(),
        // Retriable: the partition serves once recovered (a restart after a crash).
        skiff_storage::Error::Recovering { .. } => error_code::NOT_LEADER_OR_FOLLOWER,
        _ => error_code::KAFKA_STORAGE_ERROR,
    }
}
