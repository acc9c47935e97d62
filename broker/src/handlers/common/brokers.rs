//! The brokers a client is told about (Metadata's broker list, DescribeCluster's): every live
//! broker at its endpoint for the session's listener, this broker at the session's own address.
//!
//! Must never: list a broker at another listener's endpoint (the client could not reach it).

use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;

use crate::context::Ctx;
use crate::security::session::Session;

/// First Metadata version with racks.
const RACK_VERSION_MIN: i16 = 1;

/// Every live broker, at its endpoint for the session's listener (a broker without that listener
/// is left out, as Kafka does); this broker at the session's own advertised address.
pub(crate) fn listed(ctx: &Ctx, session: &Session, version: i16) -> Vec<MetadataResponseBroker> {
    let mut brokers: Vec<MetadataResponseBroker> = ctx
        .cluster
        .live_brokers()
        .into_iter()
        .filter(|broker| broker.node_id != ctx.config.node_id)
        .filter_map(|broker| {
            let endpoint = broker
                .listeners
                .iter()
                .find(|listener| listener.name == session.listener_name)?;
            let entry = MetadataResponseBroker::default()
                .with_node_id(BrokerId(broker.node_id))
                .with_host(StrBytes::from_string(endpoint.host.clone()))
                .with_port(i32::from(endpoint.port));
            Some(with_rack(entry, broker.rack.as_deref(), version))
        })
        .collect();
    let this = MetadataResponseBroker::default()
        .with_node_id(BrokerId(ctx.config.node_id))
        .with_host(StrBytes::from_string(session.advertised_host.clone()))
        .with_port(i32::from(session.advertised_port));
    brokers.push(with_rack(this, ctx.config.broker_rack.as_deref(), version));
    brokers.sort_by_key(|broker| broker.node_id.0);
    brokers
}

fn with_rack(
    broker: MetadataResponseBroker,
    rack: Option<&str>,
    version: i16,
) -> MetadataResponseBroker {
    match rack {
        Some(rack) if version >= RACK_VERSION_MIN => {
            broker.with_rack(Some(StrBytes::from_string(rack.to_owned())))
        }
        _ => broker,
    }
}
