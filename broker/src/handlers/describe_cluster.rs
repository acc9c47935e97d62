//! DescribeCluster (v0–v2), as Kafka's brokers answer it: the cluster id, the controller, every
//! live broker at its endpoint for the request's listener, and, when asked, the operations the
//! principal may perform on the cluster (a bit per Kafka operation code; 0 without Describe on
//! the cluster; Kafka's `Int.MinValue` when not asked). Only the BROKER endpoint type is served.
//!
//! v2's `include_fenced_brokers` (KIP-1073) asks for fenced brokers too, each marked. A Skiff
//! broker has no fenced registration to show: its registration lives on its session lease, so a
//! broker that stops renewing it is removed from the store (what Kafka calls unregistering), and
//! every registered broker serves. Every listed broker is therefore `is_fenced = false`, with or
//! without the flag.
//!
//! Skiff's controller is one of its brokers, so the controller id is that broker (a KRaft broker
//! answers a random live broker, since clients cannot reach its controllers); while no
//! controller is known, this broker.
//!
//! Must never: list a broker the client cannot reach on this listener.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::requests::DescribeClusterRequest;
use skiff_protocol::responses::describe_cluster::DescribeClusterResponse;

use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// Kafka's endpoint type of brokers (`EndpointType.BROKER`); CONTROLLER is 2.
const ENDPOINT_TYPE_BROKER: i8 = 1;
/// Kafka's MISMATCHED_ENDPOINT_TYPE (114): a known endpoint type this node is not.
const MISMATCHED_ENDPOINT_TYPE: i16 = 114;
/// Kafka's UNSUPPORTED_ENDPOINT_TYPE (115): an endpoint type Kafka does not know.
const UNSUPPORTED_ENDPOINT_TYPE: i16 = 115;
/// Kafka's schema default of `cluster_authorized_operations` when they were not asked for.
const AUTHORIZED_OPERATIONS_NOT_ASKED: i32 = i32::MIN;

pub(crate) fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    // No broker is fenced (see the module doc): the flag changes nothing in the answer.
    let request = request.base;
    DescribeClusterResponse::from(describe(ctx, session, header, request))
}

fn describe(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: kafka_protocol::messages::DescribeClusterRequest,
) -> kafka_protocol::messages::DescribeClusterResponse {
    use kafka_protocol::messages::DescribeClusterResponse;
    let version = header.request_api_version;
    if request.endpoint_type != ENDPOINT_TYPE_BROKER {
        let (code, message) = if request.endpoint_type == 2 {
            (
                MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_owned(),
            )
        } else {
            (
                UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {}", request.endpoint_type),
            )
        };
        let code = if version == 0 {
            error_code::INVALID_REQUEST
        } else {
            code
        };
        return DescribeClusterResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let access = ctx.access(session, header.request_api_key);
    let authorized_operations = if !request.include_cluster_authorized_operations {
        AUTHORIZED_OPERATIONS_NOT_ASKED
    } else if access.allows_cluster(Operation::Describe) {
        access.authorized_operations(
            ResourceType::Cluster,
            crate::security::acl::model::CLUSTER_NAME,
        )
    } else {
        0
    };
    let brokers = super::common::brokers::listed(ctx, session, 1)
        .into_iter()
        .map(|broker| {
            DescribeClusterBroker::default()
                .with_broker_id(broker.node_id)
                .with_host(broker.host)
                .with_port(broker.port)
                .with_rack(broker.rack)
        })
        .collect();
    let controller = ctx.cluster.controller_id().unwrap_or(ctx.config.node_id);
    let mut response = DescribeClusterResponse::default()
        .with_error_code(error_code::NONE)
        .with_cluster_id(StrBytes::from_string(ctx.cluster_id.clone()))
        .with_controller_id(BrokerId(controller))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(authorized_operations);
    if version >= 1 {
        response = response.with_endpoint_type(ENDPOINT_TYPE_BROKER);
    }
    response
}
