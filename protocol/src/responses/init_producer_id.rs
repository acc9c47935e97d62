//! The InitProducerId (key 22) response at every version Skiff serves, 0–6. kafka-protocol 0.15.1
//! stops at v5; v6 (KIP-939) appends the producer id and epoch of a prepared transaction kept
//! open across the re-initialization, which Skiff never keeps (it refuses `keep_prepared_txn`
//! as Kafka 4.1.1 does), so they stay -1 unless set. Versions 0–5 are encoded by kafka-protocol,
//! v6 as v5 with the two fields appended, checked byte for byte against Kafka 4.1.1's
//! `InitProducerIdResponseData` in `txn_fixtures`. It implements kafka-protocol's `Encodable`,
//! so the broker encodes it through the same path as every other response.
//!
//! The [`Decodable`] side is for clients (tests, benches), never for bytes a broker reads.
//!
//! Must never: encode a version past 6 (its schema is unknown here).

use std::collections::BTreeMap;

use bytes::BufMut;
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::past_crate::{encode_extended, extended_size};
use crate::requests::source::{BytesSource, Source};

/// First version with the ongoing transaction's producer id and epoch.
pub const ONGOING_TXN_VERSION_MIN: i16 = 6;

/// Newest version kafka-protocol 0.15.1 encodes.
const CRATE_VERSION_MAX: i16 = 5;

/// What v6 appends: the ongoing transaction's producer id (int64) and epoch (int16).
const ONGOING_TXN_BYTES: usize = 8 + 2;

/// An InitProducerId response, any version 0–6: kafka-protocol's message and v6's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct InitProducerIdResponse {
    /// The fields of versions 0–5.
    pub base: kafka_protocol::messages::InitProducerIdResponse,
    /// v6+: the producer id of the prepared transaction kept open, -1 for none.
    pub ongoing_txn_producer_id: ProducerId,
    /// v6+: the epoch of the prepared transaction kept open, -1 for none.
    pub ongoing_txn_producer_epoch: i16,
}

impl Default for InitProducerIdResponse {
    /// Kafka's defaults: no ongoing transaction kept (-1, -1).
    fn default() -> Self {
        Self {
            base: kafka_protocol::messages::InitProducerIdResponse::default(),
            ongoing_txn_producer_id: ProducerId(-1),
            ongoing_txn_producer_epoch: -1,
        }
    }
}

impl From<kafka_protocol::messages::InitProducerIdResponse> for InitProducerIdResponse {
    fn from(base: kafka_protocol::messages::InitProducerIdResponse) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }
}

impl InitProducerIdResponse {
    fn without_tags(&self) -> kafka_protocol::messages::InitProducerIdResponse {
        self.base
            .clone()
            .with_unknown_tagged_fields(BTreeMap::new())
    }

    fn ongoing_txn(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ONGOING_TXN_BYTES);
        out.put_i64(self.ongoing_txn_producer_id.0);
        out.put_i16(self.ongoing_txn_producer_epoch);
        out
    }
}

impl Encodable for InitProducerIdResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        match version {
            ONGOING_TXN_VERSION_MIN => {
                let tags = &self.base.unknown_tagged_fields;
                let appended = self.ongoing_txn();
                encode_extended(
                    &self.without_tags(),
                    CRATE_VERSION_MAX,
                    &appended,
                    tags,
                    buf,
                )
            }
            version if version < ONGOING_TXN_VERSION_MIN => self.base.encode(buf, version),
            version => anyhow::bail!("InitProducerId response v{version} is not encoded"),
        }
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        match version {
            ONGOING_TXN_VERSION_MIN => {
                let tags = &self.base.unknown_tagged_fields;
                extended_size(
                    &self.without_tags(),
                    CRATE_VERSION_MAX,
                    ONGOING_TXN_BYTES,
                    tags,
                )
            }
            version if version < ONGOING_TXN_VERSION_MIN => self.base.compute_size(version),
            version => anyhow::bail!("InitProducerId response v{version} is not encoded"),
        }
    }
}

impl Decodable for InitProducerIdResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        if version < ONGOING_TXN_VERSION_MIN {
            let base = kafka_protocol::messages::InitProducerIdResponse::decode(buf, version)?;
            return Ok(Self::from(base));
        }
        anyhow::ensure!(
            version == ONGOING_TXN_VERSION_MIN,
            "InitProducerId response v{version} is not decoded"
        );
        let body = buf.try_get_bytes(buf.remaining())?;
        let mut s = BytesSource::new(&body);
        let base = kafka_protocol::messages::InitProducerIdResponse::default()
            .with_throttle_time_ms(s.i32()?)
            .with_error_code(s.i16()?)
            .with_producer_id(ProducerId(s.i64()?))
            .with_producer_epoch(s.i16()?);
        let ongoing_txn_producer_id = ProducerId(s.i64()?);
        let ongoing_txn_producer_epoch = s.i16()?;
        let tags = s.unknown_tagged_fields()?;
        Ok(Self {
            base: base.with_unknown_tagged_fields(tags),
            ongoing_txn_producer_id,
            ongoing_txn_producer_epoch,
        })
    }
}
