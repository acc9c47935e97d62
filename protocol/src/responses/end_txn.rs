//! The EndTxn (key 26) response at every version Skiff serves, 0–5. kafka-protocol 0.15.1 stops
//! at v4; v5 (KIP-890, transaction version 2) adds the producer id and epoch the coordinator
//! bumped at the end of the transaction, which the client uses for its next one. Versions 0–4 are
//! encoded by kafka-protocol; v5 by hand, checked byte for byte against Kafka 4.1.1's
//! `EndTxnResponseData` in the tests. It implements kafka-protocol's `Encodable`, so the broker
//! encodes it through the same path as every other response.
//!
//! Must never: encode a version past 5 (its schema is unknown here), or drop the producer id and
//! epoch at v5 (a TV2 client would start its next transaction with a stale epoch).

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use crate::past_crate::{put_tagged_fields, tagged_fields_size};

/// First EndTxn version whose response carries the producer id and epoch.
pub const END_TXN_PRODUCER_VERSION_MIN: i16 = 5;

/// Newest EndTxn response version this module encodes.
pub const END_TXN_VERSION_MAX: i16 = 5;

/// Fixed fields of a v5 response: throttle int32, error int16, producer id int64, epoch int16.
const V5_FIXED_BYTES: usize = 4 + 2 + 8 + 2;

/// An EndTxn response, any version 0–5. Fields a version lacks are not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnResponse {
    /// Throttle time in milliseconds.
    pub throttle_time_ms: i32,
    /// Error code, 0 for none.
    pub error_code: i16,
    /// v5+: the producer id for the next transaction (-1 when the request failed).
    pub producer_id: ProducerId,
    /// v5+: the producer epoch for the next transaction (-1 when the request failed).
    pub producer_epoch: i16,
    /// Unknown tagged fields (v3+).
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl Default for EndTxnResponse {
    /// Kafka's defaults: no error, producer id and epoch -1.
    fn default() -> Self {
        Self {
            throttle_time_ms: 0,
            error_code: 0,
            producer_id: ProducerId(-1),
            producer_epoch: -1,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl EndTxnResponse {
    /// The kafka-protocol message for versions 0–4 (no producer fields).
    fn crate_message(&self) -> kafka_protocol::messages::EndTxnResponse {
        kafka_protocol::messages::EndTxnResponse::default()
            .with_throttle_time_ms(self.throttle_time_ms)
            .with_error_code(self.error_code)
            .with_unknown_tagged_fields(self.unknown_tagged_fields.clone())
    }

    /// The v5 body: v4's fields, the producer id and epoch, then the tagged-field section.
    fn encode_v5(&self) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.v5_size()?);
        out.put_i32(self.throttle_time_ms);
        out.put_i16(self.error_code);
        out.put_i64(self.producer_id.0);
        out.put_i16(self.producer_epoch);
        put_tagged_fields(&mut out, &self.unknown_tagged_fields)?;
        Ok(out)
    }

    fn v5_size(&self) -> anyhow::Result<usize> {
        Ok(V5_FIXED_BYTES + tagged_fields_size(&self.unknown_tagged_fields)?)
    }
}

impl Encodable for EndTxnResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        match version {
            END_TXN_PRODUCER_VERSION_MIN..=END_TXN_VERSION_MAX => {
                buf.put_slice(&self.encode_v5()?);
                Ok(())
            }
            // Below v5 the crate's encoder (which refuses negative versions itself).
            version if version < END_TXN_PRODUCER_VERSION_MIN => {
                self.crate_message().encode(buf, version)
            }
            version => anyhow::bail!("EndTxn response v{version} is not encoded"),
        }
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        match version {
            END_TXN_PRODUCER_VERSION_MIN..=END_TXN_VERSION_MAX => self.v5_size(),
            version if version < END_TXN_PRODUCER_VERSION_MIN => {
                self.crate_message().compute_size(version)
            }
            version => anyhow::bail!("EndTxn response v{version} is not encoded"),
        }
    }
}
