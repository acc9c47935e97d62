//! InitProducerId (key 22) request decoding, versions 0–5 (v3 adds the producer id and epoch of
//! KIP-360's recovery; v4 and v5 add no field, only error codes the client understands).

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, ProducerId, TransactionalId};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<InitProducerIdRequest, DecodeError> {
    let c = flexible(ApiKey::InitProducerId, version);
    let mut m = InitProducerIdRequest::default();
    m.transactional_id = s.nullable_string(c)?.map(TransactionalId);
    m.transaction_timeout_ms = s.i32()?;
    if version >= 3 {
        m.producer_id = ProducerId(s.i64()?);
        m.producer_epoch = s.i16()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
