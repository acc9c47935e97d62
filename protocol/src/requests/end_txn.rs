//! EndTxn (key 26) request decoding, versions 0–5 (v3+ flexible). Every version has the same
//! fields; v5 (past kafka-protocol 0.15.1, same bytes as v4) tells the coordinator that the client
//! speaks transaction version 2 and reads the bumped producer epoch from the answer.

use kafka_protocol::messages::{ApiKey, EndTxnRequest, ProducerId, TransactionalId};

use super::flexible;
use super::source::Source;
use crate::error::DecodeError;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<EndTxnRequest, DecodeError> {
    let c = flexible(ApiKey::EndTxn, version);
    let mut m = EndTxnRequest::default();
    m.transactional_id = TransactionalId(s.string(c)?);
    m.producer_id = ProducerId(s.i64()?);
    m.producer_epoch = s.i16()?;
    m.committed = s.bool()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
