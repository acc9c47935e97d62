//! InitProducerId (key 22) request decoding, versions 0–6 (v3 adds the producer id and epoch of
//! KIP-360's recovery; v4 and v5 add no field, only error codes the client understands; v6 adds
//! KIP-939's two-phase-commit flags, past kafka-protocol 0.15.1, so the request is
//! [`InitProducerIdRequest`]: the crate's message and the two flags).

use std::collections::BTreeMap;

use kafka_protocol::messages::{ApiKey, ProducerId, TransactionalId};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;
use crate::past_crate::{encode_extended, extended_size};

/// First version with KIP-939's `enable_2pc` and `keep_prepared_txn`.
pub const TWO_PHASE_COMMIT_VERSION_MIN: i16 = 6;

/// Newest version kafka-protocol 0.15.1 encodes; v6 is v5 with the flags appended.
const CRATE_VERSION_MAX: i16 = 5;

/// The two flags v6 appends: one byte each.
const TWO_PHASE_COMMIT_FLAG_BYTES: usize = 2;

/// An InitProducerId request at any version 0–6: kafka-protocol's message (every field up to
/// v5) and v6's flags, which are false at older versions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InitProducerIdRequest {
    /// The fields of versions 0–5.
    pub base: kafka_protocol::messages::InitProducerIdRequest,
    /// v6+: the producer takes part in an external two-phase commit (KIP-939).
    pub enable_2pc: bool,
    /// v6+: keep the prepared transaction open across the re-initialization (KIP-939).
    pub keep_prepared_txn: bool,
}

impl InitProducerIdRequest {
    /// v5's message without tagged fields, for [`encode_extended`].
    fn without_tags(&self) -> kafka_protocol::messages::InitProducerIdRequest {
        self.base
            .clone()
            .with_unknown_tagged_fields(BTreeMap::new())
    }

    fn flags(&self) -> [u8; TWO_PHASE_COMMIT_FLAG_BYTES] {
        [u8::from(self.enable_2pc), u8::from(self.keep_prepared_txn)]
    }
}

impl Encodable for InitProducerIdRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        if version < TWO_PHASE_COMMIT_VERSION_MIN {
            anyhow::ensure!(
                !self.enable_2pc && !self.keep_prepared_txn,
                "InitProducerId v{version} has no two-phase-commit flags"
            );
            return self.base.encode(buf, version);
        }
        anyhow::ensure!(
            version == TWO_PHASE_COMMIT_VERSION_MIN,
            "InitProducerId v{version} is not encoded"
        );
        let tags = &self.base.unknown_tagged_fields;
        encode_extended(
            &self.without_tags(),
            CRATE_VERSION_MAX,
            &self.flags(),
            tags,
            buf,
        )
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        if version < TWO_PHASE_COMMIT_VERSION_MIN {
            return self.base.compute_size(version);
        }
        let tags = &self.base.unknown_tagged_fields;
        extended_size(
            &self.without_tags(),
            CRATE_VERSION_MAX,
            TWO_PHASE_COMMIT_FLAG_BYTES,
            tags,
        )
    }
}

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<InitProducerIdRequest, DecodeError> {
    let c = flexible(ApiKey::InitProducerId, version);
    let mut request = InitProducerIdRequest::default();
    let m = &mut request.base;
    m.transactional_id = s.nullable_string(c)?.map(TransactionalId);
    m.transaction_timeout_ms = s.i32()?;
    if version >= 3 {
        m.producer_id = ProducerId(s.i64()?);
        m.producer_epoch = s.i16()?;
    }
    if version >= TWO_PHASE_COMMIT_VERSION_MIN {
        request.enable_2pc = s.bool()?;
        request.keep_prepared_txn = s.bool()?;
    }
    if c {
        request.base.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(request)
}
