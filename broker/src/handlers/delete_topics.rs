//! DeleteTopics: by name (v0–5) or by name or id (v6). The topic is marked for deletion in the
//! metadata store; the controller removes it and every replica's logs follow
//! (`Cluster::delete_topic`, answered once this broker's image shows it gone). Each topic needs
//! Delete (TOPIC_AUTHORIZATION_FAILED otherwise); internal topics are refused.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    DeleteTopicsRequest, DeleteTopicsResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::common::throttle::Turn;
use super::error_code;
use crate::context::Ctx;
use crate::partition::topics::TopicError;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// First DeleteTopics response version with error messages.
const ERROR_MESSAGE_VERSION_MIN: i16 = 5;
/// First version naming topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 6;

/// First version whose clients know THROTTLING_QUOTA_EXCEEDED (KIP-599): an exhausted
/// `controller_mutation_rate` refuses the topic; older versions are throttled only.
const STRICT_MUTATION_QUOTA_VERSION_MIN: i16 = 5;

/// Deletes one topic within the client's mutation quota (its partitions count against it).
async fn delete_one(
    ctx: &Ctx,
    turn: &Turn<'_>,
    strict: bool,
    name: &str,
    wait: std::time::Duration,
) -> Result<(), (i16, String)> {
    if let Some(refusal) = turn.mutation_refused(strict) {
        return Err(refusal);
    }
    let partitions = ctx.topics.get(name).map_or(0, |t| t.record.replicas.len());
    ctx.cluster
        .delete_topic(name, wait)
        .await
        .map_err(|error| (error.code(), error.to_string()))?;
    turn.record_mutation(partitions);
    Ok(())
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    turn: &Turn<'_>,
    header: &RequestHeader,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    let access = ctx.access(session, header.request_api_key);
    let strict = header.request_api_version >= STRICT_MUTATION_QUOTA_VERSION_MIN;
    let mut targets: Vec<(Option<TopicName>, uuid::Uuid)> = request
        .topic_names
        .into_iter()
        .map(|name| (Some(name), uuid::Uuid::nil()))
        .collect();
    targets.extend(
        request
            .topics
            .into_iter()
            .map(|topic| (topic.name, topic.topic_id)),
    );
    let wait = crate::cluster::topic_changes::change_wait(request.timeout_ms);
    let mut responses = Vec::with_capacity(targets.len());
    for (name, topic_id) in targets {
        let resolved = match &name {
            Some(name) => Some(name.0.to_string()),
            None => ctx
                .topics
                .get_by_id(topic_id.as_bytes())
                .map(|topic| topic.name.clone()),
        };
        let outcome = match &resolved {
            Some(resolved) if !access.allows(Operation::Delete, ResourceType::Topic, resolved) => {
                Err((
                    error_code::TOPIC_AUTHORIZATION_FAILED,
                    "not authorized to delete the topic".to_owned(),
                ))
            }
            Some(resolved) => delete_one(ctx, turn, strict, resolved, wait).await,
            None => Err((TopicError::Unknown.code(), TopicError::Unknown.to_string())),
        };
        let version = header.request_api_version;
        let mut result = DeletableTopicResult::default().with_name(
            resolved
                .map(|name| TopicName(StrBytes::from_string(name)))
                .or(name),
        );
        if version >= TOPIC_ID_VERSION_MIN {
            result = result.with_topic_id(topic_id);
        }
        if let Err((code, message)) = outcome {
            result = result.with_error_code(code);
            if version >= ERROR_MESSAGE_VERSION_MIN {
                result = result.with_error_message(Some(StrBytes::from_string(message)));
            }
        }
        responses.push(result);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
