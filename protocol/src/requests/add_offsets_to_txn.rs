//! AddOffsetsToTxn (key 25) request decoding, versions 0–4 (v3+ flexible): the consumer group whose
//! offsets a transaction will commit.

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, ApiKey, GroupId, ProducerId, TransactionalId,
};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AddOffsetsToTxnRequest, DecodeError> {
    let c = flexible(ApiKey::AddOffsetsToTxn, version);
    let mut m = AddOffsetsToTxnRequest::default();
    m.transactional_id = TransactionalId(s.string(c)?);
    m.producer_id = ProducerId(s.i64()?);
    m.producer_epoch = s.i16()?;
    m.group_id = GroupId(s.string(c)?);
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
