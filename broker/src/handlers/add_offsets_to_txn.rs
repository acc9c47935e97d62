//! AddOffsetsToTxn: the consumer group's `__consumer_offsets` partition joins the transaction, so
//! the group's TxnOffsetCommit is made visible or dropped by the transaction's marker (KIP-98,
//! `sendOffsetsToTransaction`). Handed to the transaction coordinator's task.
//!
//! Authorization as Kafka: Write on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
//! Read on the group (GROUP_AUTHORIZATION_FAILED).
//!
//! Must never: pick the group's partition by anything but the offsets topic's partition count
//! (the group coordinator's hash), or create the offsets topic.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, RequestHeader};
use skiff_txn::{AddPartitions, Response};

use super::common::txn::{call, for_version};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

/// First version whose clients know PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION_MIN: i16 = 2;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let transactional_id = request.transactional_id.to_string();
    let group_id = request.group_id.to_string();
    let refused = if !access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        Some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !access.allows(Operation::Read, ResourceType::Group, &group_id) {
        Some(error_code::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    if let Some(code) = refused {
        return AddOffsetsToTxnResponse::default().with_error_code(code);
    }
    // The offsets topic's partitions as the cluster has them; before it exists, the count it will
    // be created with (the group coordinator uses the same).
    let existing = ctx
        .cluster
        .partition_states(skiff_cluster::topics::OFFSETS_TOPIC)
        .len();
    let offsets_partitions = match i32::try_from(existing) {
        Ok(count) if count > 0 => count,
        _ => ctx.config.offsets_topic_num_partitions,
    };
    let asked = TxnRequest::AddOffsets {
        request: AddPartitions {
            transactional_id,
            producer_id: request.producer_id.0,
            producer_epoch: request.producer_epoch,
            partitions: Vec::new(),
            client_tv: 1,
        },
        group_id,
        offsets_partitions,
    };
    let code = match call(ctx, version, asked).await {
        Some(Response::AddOffsets { error }) => {
            for_version(error, version, PRODUCER_FENCED_VERSION_MIN)
        }
        _ => error_code::COORDINATOR_NOT_AVAILABLE,
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}
