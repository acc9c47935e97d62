//! The DescribeCluster (key 60) response at every version Skiff serves, 0–2. kafka-protocol
//! 0.15.1 stops at v1; v2 (KIP-1073) adds `is_fenced` inside each broker entry, so v2 is
//! written here field by field (checked byte for byte against Kafka 4.1.1's
//! `DescribeClusterResponseData` in the tests below), v0–1 by the crate. It implements
//! kafka-protocol's `Encodable`, so the broker encodes it through the same path as every other
//! response; the [`Decodable`] side is for clients (tests), never for bytes a broker reads.
//!
//! Must never: encode a version past 2 (its schema is unknown here).

use std::collections::BTreeSet;

use bytes::BufMut;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::codec::put_unsigned_varint;
use crate::error::DecodeError;
use crate::limits::BROKERS_PER_RESPONSE_MAX;
use crate::past_crate::{put_compact_nullable_string, put_tagged_fields};
use crate::requests::source::{array, BytesSource, Source};

/// First version with each broker's `is_fenced`.
pub const FENCED_VERSION_MIN: i16 = 2;

/// Fewest bytes of a broker entry: id, host prefix, port, rack prefix, flag, tag count.
const BROKER_BYTES_MIN: usize = 4 + 1 + 4 + 1 + 1 + 1;

/// A DescribeCluster response, any version 0–2: kafka-protocol's message and, for v2, which of
/// its brokers are fenced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DescribeClusterResponse {
    /// The fields of versions 0–1.
    pub base: kafka_protocol::messages::DescribeClusterResponse,
    /// v2+: the ids of the listed brokers that are fenced (`is_fenced`).
    pub fenced: BTreeSet<BrokerId>,
}

impl From<kafka_protocol::messages::DescribeClusterResponse> for DescribeClusterResponse {
    fn from(base: kafka_protocol::messages::DescribeClusterResponse) -> Self {
        Self {
            base,
            fenced: BTreeSet::new(),
        }
    }
}

impl DescribeClusterResponse {
    fn encode_v2(&self) -> anyhow::Result<Vec<u8>> {
        let base = &self.base;
        let mut out = Vec::new();
        out.put_i32(base.throttle_time_ms);
        out.put_i16(base.error_code);
        put_compact_nullable_string(&mut out, base.error_message.as_deref())?;
        out.put_i8(base.endpoint_type);
        put_compact_nullable_string(&mut out, Some(&base.cluster_id))?;
        out.put_i32(base.controller_id.0);
        put_unsigned_varint(&mut out, u32::try_from(base.brokers.len() + 1)?);
        for broker in &base.brokers {
            out.put_i32(broker.broker_id.0);
            put_compact_nullable_string(&mut out, Some(&broker.host))?;
            out.put_i32(broker.port);
            put_compact_nullable_string(&mut out, broker.rack.as_deref())?;
            out.put_u8(u8::from(self.fenced.contains(&broker.broker_id)));
            put_tagged_fields(&mut out, &broker.unknown_tagged_fields)?;
        }
        out.put_i32(base.cluster_authorized_operations);
        put_tagged_fields(&mut out, &base.unknown_tagged_fields)?;
        Ok(out)
    }
}

impl Encodable for DescribeClusterResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        match version {
            FENCED_VERSION_MIN => {
                buf.put_slice(&self.encode_v2()?);
                Ok(())
            }
            version if version < FENCED_VERSION_MIN => self.base.encode(buf, version),
            version => anyhow::bail!("DescribeCluster response v{version} is not encoded"),
        }
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        match version {
            FENCED_VERSION_MIN => Ok(self.encode_v2()?.len()),
            version if version < FENCED_VERSION_MIN => self.base.compute_size(version),
            version => anyhow::bail!("DescribeCluster response v{version} is not encoded"),
        }
    }
}

impl Decodable for DescribeClusterResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        if version < FENCED_VERSION_MIN {
            let base = kafka_protocol::messages::DescribeClusterResponse::decode(buf, version)?;
            return Ok(Self::from(base));
        }
        anyhow::ensure!(
            version == FENCED_VERSION_MIN,
            "DescribeCluster response v{version} is not decoded"
        );
        let body = buf.try_get_bytes(buf.remaining())?;
        Ok(decode_v2(&mut BytesSource::new(&body))?)
    }
}

fn decode_v2<S: Source>(s: &mut S) -> Result<DescribeClusterResponse, DecodeError> {
    let mut response = DescribeClusterResponse::default();
    let base = &mut response.base;
    base.throttle_time_ms = s.i32()?;
    base.error_code = s.i16()?;
    base.error_message = s.nullable_string(true)?;
    base.endpoint_type = s.i8()?;
    base.cluster_id = s.string(true)?;
    base.controller_id = BrokerId(s.i32()?);
    let fenced = &mut response.fenced;
    base.brokers = array(s, true, BROKER_BYTES_MIN, BROKERS_PER_RESPONSE_MAX, |s| {
        let mut broker = DescribeClusterBroker::default();
        broker.broker_id = BrokerId(s.i32()?);
        broker.host = s.string(true)?;
        broker.port = s.i32()?;
        broker.rack = s.nullable_string(true)?;
        if s.bool()? {
            fenced.insert(broker.broker_id);
        }
        broker.unknown_tagged_fields = s.unknown_tagged_fields()?;
        Ok(broker)
    })?;
    base.cluster_authorized_operations = s.i32()?;
    base.unknown_tagged_fields = s.unknown_tagged_fields()?;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::requests::{decode_body, DescribeClusterRequest, Request};

    fn hex(text: &str) -> Bytes {
        (0..text.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
            .collect::<Vec<u8>>()
            .into()
    }

    /// Kafka 4.1.1's `DescribeClusterResponseData` at v2: throttle 3, cluster "c", controller 1,
    /// broker 1 at h1:9092 (no rack), broker 2 at h2:9093 rack "r" fenced, operations not asked.
    const KAFKA_V2: &str = "00000003000000010263000000010300000001036831000023840000000000000203683200002385027201008000000000";

    fn sample() -> DescribeClusterResponse {
        let broker = |id: i32, host: &'static str, port: i32| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(StrBytes::from_static_str(host))
                .with_port(port)
        };
        let base = kafka_protocol::messages::DescribeClusterResponse::default()
            .with_throttle_time_ms(3)
            .with_endpoint_type(1)
            .with_cluster_id(StrBytes::from_static_str("c"))
            .with_controller_id(BrokerId(1))
            .with_brokers(vec![
                broker(1, "h1", 9092),
                broker(2, "h2", 9093).with_rack(Some(StrBytes::from_static_str("r"))),
            ])
            .with_cluster_authorized_operations(i32::MIN);
        DescribeClusterResponse {
            base,
            fenced: BTreeSet::from([BrokerId(2)]),
        }
    }

    #[test]
    fn v2_is_kafkas_bytes_and_reads_back() {
        let response = sample();
        let mut out = Vec::new();
        response.encode(&mut out, 2).unwrap();
        assert_eq!(out, hex(KAFKA_V2).to_vec());
        assert_eq!(response.compute_size(2).unwrap(), out.len());
        let read = DescribeClusterResponse::decode(&mut hex(KAFKA_V2), 2).unwrap();
        assert_eq!(read, response);
        // v1 has no is_fenced: the crate's bytes.
        let mut v1 = Vec::new();
        response.encode(&mut v1, 1).unwrap();
        assert_eq!(v1, {
            let mut crate_bytes = Vec::new();
            response.base.encode(&mut crate_bytes, 1).unwrap();
            crate_bytes
        });
        assert!(response.compute_size(3).is_err());
    }

    #[test]
    fn an_error_at_v2_is_kafkas_bytes() {
        let error = DescribeClusterResponse::from(
            kafka_protocol::messages::DescribeClusterResponse::default()
                .with_error_code(114)
                .with_error_message(Some(StrBytes::from_static_str("m")))
                .with_endpoint_type(1)
                .with_controller_id(BrokerId(-1))
                .with_cluster_authorized_operations(i32::MIN),
        );
        let mut out = Vec::new();
        error.encode(&mut out, 2).unwrap();
        assert_eq!(
            out,
            hex("000000000072026d0101ffffffff018000000000").to_vec()
        );
    }

    #[test]
    fn kafkas_v2_request_decodes_and_re_encodes() {
        for (body, fenced) in [("01010100", true), ("00010000", false)] {
            let bytes = hex(body);
            let Request::DescribeCluster(request) =
                decode_body(kafka_protocol::messages::ApiKey::DescribeCluster, 2, &bytes).unwrap()
            else {
                panic!()
            };
            assert_eq!(request.include_fenced_brokers, fenced);
            let again = Request::DescribeCluster(request).encode_body(2).unwrap();
            assert_eq!(again.as_ref(), bytes.as_ref());
        }
        let v1 = DescribeClusterRequest {
            include_fenced_brokers: true,
            ..DescribeClusterRequest::default()
        };
        assert!(v1.encode(&mut Vec::new(), 1).is_err(), "v1 has no flag");
    }
}
