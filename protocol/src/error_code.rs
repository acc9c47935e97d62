//! Kafka's error codes: the one table Skiff names them from (the codes and names of Kafka's
//! `Errors.java`, as kafka-protocol lists them). Handlers and decoders use the `i16` constants of
//! [`error_code`](self); pure cores that return errors as values use [`ErrorCode`], whose
//! associated constants are generated from the same rows.
//!
//! Must never: define a code anywhere else.

/// A Kafka error code as a value: what a pure core returns and a handler puts on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// The code on the wire.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// Whether Kafka marks the error retriable (clients retry it on their own).
    pub fn is_retriable(self) -> bool {
        ALL.iter()
            .any(|(_, code, retriable)| *code == self.0 && *retriable)
    }
}

impl From<ErrorCode> for i16 {
    fn from(error: ErrorCode) -> Self {
        error.0
    }
}

macro_rules! error_codes {
    ($( ($name:ident, $code:expr, $retriable:expr) ),* $(,)?) => {
        $(
            #[doc = concat!("Kafka error ", stringify!($code), ".")]
            pub const $name: i16 = $code;
        )*

        #[allow(missing_docs)]
        impl ErrorCode {
            $( pub const $name: ErrorCode = ErrorCode($code); )*
        }

        /// Every code with its name and whether Kafka marks it retriable.
        pub const ALL: &[(&str, i16, bool)] = &[ $( (stringify!($name), $code, $retriable) ),* ];
    };
}

error_codes! {
    (NONE, 0, false),
    (UNKNOWN_SERVER_ERROR, -1, false),
    (OFFSET_OUT_OF_RANGE, 1, false),
    (CORRUPT_MESSAGE, 2, true),
    (UNKNOWN_TOPIC_OR_PARTITION, 3, true),
    (INVALID_FETCH_SIZE, 4, false),
    (LEADER_NOT_AVAILABLE, 5, true),
    (NOT_LEADER_OR_FOLLOWER, 6, true),
    (REQUEST_TIMED_OUT, 7, true),
    (BROKER_NOT_AVAILABLE, 8, false),
    (REPLICA_NOT_AVAILABLE, 9, true),
    (MESSAGE_TOO_LARGE, 10, false),
    (STALE_CONTROLLER_EPOCH, 11, false),
    (OFFSET_METADATA_TOO_LARGE, 12, false),
    (NETWORK_EXCEPTION, 13, true),
    (COORDINATOR_LOAD_IN_PROGRESS, 14, true),
    (COORDINATOR_NOT_AVAILABLE, 15, true),
    (NOT_COORDINATOR, 16, true),
    (INVALID_TOPIC_EXCEPTION, 17, false),
    (RECORD_LIST_TOO_LARGE, 18, false),
    (NOT_ENOUGH_REPLICAS, 19, true),
    (NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20, true),
    (INVALID_REQUIRED_ACKS, 21, false),
    (ILLEGAL_GENERATION, 22, false),
    (INCONSISTENT_GROUP_PROTOCOL, 23, false),
    (INVALID_GROUP_ID, 24, false),
    (UNKNOWN_MEMBER_ID, 25, false),
    (INVALID_SESSION_TIMEOUT, 26, false),
    (REBALANCE_IN_PROGRESS, 27, false),
    (INVALID_COMMIT_OFFSET_SIZE, 28, false),
    (TOPIC_AUTHORIZATION_FAILED, 29, false),
    (GROUP_AUTHORIZATION_FAILED, 30, false),
    (CLUSTER_AUTHORIZATION_FAILED, 31, false),
    (INVALID_TIMESTAMP, 32, false),
    (UNSUPPORTED_SASL_MECHANISM, 33, false),
    (ILLEGAL_SASL_STATE, 34, false),
    (UNSUPPORTED_VERSION, 35, false),
    (TOPIC_ALREADY_EXISTS, 36, false),
    (INVALID_PARTITIONS, 37, false),
    (INVALID_REPLICATION_FACTOR, 38, false),
    (INVALID_REPLICA_ASSIGNMENT, 39, false),
    (INVALID_CONFIG, 40, false),
    (NOT_CONTROLLER, 41, true),
    (INVALID_REQUEST, 42, false),
    (UNSUPPORTED_FOR_MESSAGE_FORMAT, 43, false),
    (POLICY_VIOLATION, 44, false),
    (OUT_OF_ORDER_SEQUENCE_NUMBER, 45, false),
    (DUPLICATE_SEQUENCE_NUMBER, 46, false),
    (INVALID_PRODUCER_EPOCH, 47, false),
    (INVALID_TXN_STATE, 48, false),
    (INVALID_PRODUCER_ID_MAPPING, 49, false),
    (INVALID_TRANSACTION_TIMEOUT, 50, false),
    (CONCURRENT_TRANSACTIONS, 51, false),
    (TRANSACTION_COORDINATOR_FENCED, 52, false),
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 53, false),
    (SECURITY_DISABLED, 54, false),
    (OPERATION_NOT_ATTEMPTED, 55, false),
    (KAFKA_STORAGE_ERROR, 56, true),
    (LOG_DIR_NOT_FOUND, 57, false),
    (SASL_AUTHENTICATION_FAILED, 58, false),
    (UNKNOWN_PRODUCER_ID, 59, false),
    (REASSIGNMENT_IN_PROGRESS, 60, false),
    (DELEGATION_TOKEN_AUTH_DISABLED, 61, false),
    (DELEGATION_TOKEN_NOT_FOUND, 62, false),
    (DELEGATION_TOKEN_OWNER_MISMATCH, 63, false),
    (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, 64, false),
    (DELEGATION_TOKEN_AUTHORIZATION_FAILED, 65, false),
    (DELEGATION_TOKEN_EXPIRED, 66, false),
    (INVALID_PRINCIPAL_TYPE, 67, false),
    (NON_EMPTY_GROUP, 68, false),
    (GROUP_ID_NOT_FOUND, 69, false),
    (FETCH_SESSION_ID_NOT_FOUND, 70, true),
    (INVALID_FETCH_SESSION_EPOCH, 71, true),
    (LISTENER_NOT_FOUND, 72, true),
    (TOPIC_DELETION_DISABLED, 73, false),
    (FENCED_LEADER_EPOCH, 74, true),
    (UNKNOWN_LEADER_EPOCH, 75, true),
    (UNSUPPORTED_COMPRESSION_TYPE, 76, false),
    (STALE_BROKER_EPOCH, 77, false),
    (OFFSET_NOT_AVAILABLE, 78, true),
    (MEMBER_ID_REQUIRED, 79, false),
    (PREFERRED_LEADER_NOT_AVAILABLE, 80, true),
    (GROUP_MAX_SIZE_REACHED, 81, false),
    (FENCED_INSTANCE_ID, 82, false),
    (ELIGIBLE_LEADERS_NOT_AVAILABLE, 83, true),
    (ELECTION_NOT_NEEDED, 84, true),
    (NO_REASSIGNMENT_IN_PROGRESS, 85, false),
    (GROUP_SUBSCRIBED_TO_TOPIC, 86, false),
    (INVALID_RECORD, 87, false),
    (UNSTABLE_OFFSET_COMMIT, 88, true),
    (THROTTLING_QUOTA_EXCEEDED, 89, true),
    (PRODUCER_FENCED, 90, false),
    (RESOURCE_NOT_FOUND, 91, false),
    (DUPLICATE_RESOURCE, 92, false),
    (UNACCEPTABLE_CREDENTIAL, 93, false),
    (INCONSISTENT_VOTER_SET, 94, false),
    (INVALID_UPDATE_VERSION, 95, false),
    (FEATURE_UPDATE_FAILED, 96, false),
    (PRINCIPAL_DESERIALIZATION_FAILURE, 97, false),
    (SNAPSHOT_NOT_FOUND, 98, false),
    (POSITION_OUT_OF_RANGE, 99, false),
    (UNKNOWN_TOPIC_ID, 100, true),
    (DUPLICATE_BROKER_REGISTRATION, 101, false),
    (BROKER_ID_NOT_REGISTERED, 102, false),
    (INCONSISTENT_TOPIC_ID, 103, true),
    (INCONSISTENT_CLUSTER_ID, 104, false),
    (TRANSACTIONAL_ID_NOT_FOUND, 105, false),
    (FETCH_SESSION_TOPIC_ID_ERROR, 106, true),
    // Past kafka-protocol 0.15.1's table: Kafka 4.1.1's `Errors.java` (KIP-848, KIP-890), codes
    // and retriability read from its `Errors.forCode(code)` (none of these is a
    // `RetriableException`).
    (FENCED_MEMBER_EPOCH, 110, false),
    (UNRELEASED_INSTANCE_ID, 111, false),
    (UNSUPPORTED_ASSIGNOR, 112, false),
    (STALE_MEMBER_EPOCH, 113, false),
    (TRANSACTION_ABORTABLE, 120, false),
    (INVALID_REGULAR_EXPRESSION, 128, false),
}

/// The codes above that kafka-protocol 0.15.1 does not know, checked against Kafka 4.1.1 by hand.
#[cfg(test)]
const PAST_CRATE_CODES: &[i16] = &[
    FENCED_MEMBER_EPOCH,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR,
    STALE_MEMBER_EPOCH,
    TRANSACTION_ABORTABLE,
    INVALID_REGULAR_EXPRESSION,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_agree_with_kafka_protocol() {
        let mut seen = std::collections::BTreeSet::new();
        for (name, code, _) in ALL {
            assert!(seen.insert(*code), "{name} repeats code {code}");
            if *code != 0 && !PAST_CRATE_CODES.contains(code) {
                let known = kafka_protocol::error::ResponseError::try_from_code(*code)
                    .unwrap_or_else(|| panic!("{name} = {code} is not a Kafka error"));
                assert_eq!(known.code(), *code);
                assert_eq!(
                    ErrorCode(*code).is_retriable(),
                    known.is_retriable(),
                    "{name}"
                );
            }
        }
        assert_eq!(ErrorCode::NOT_LEADER_OR_FOLLOWER.code(), 6);
        assert_eq!(NOT_ENOUGH_REPLICAS_AFTER_APPEND, 20);
    }
}
