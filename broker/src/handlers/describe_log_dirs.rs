//! DescribeLogDirs: the broker's one log directory (`log.dirs`) with the size of each partition
//! stored there (offset lag 0 and never a future replica: there is no replica movement), and from
//! v4 the file system's total and usable bytes (`statvfs`). Needs Describe on the cluster; without
//! it the answer lists nothing, with CLUSTER_AUTHORIZATION_FAILED from v3 (the first version with
//! a top-level error), as Kafka answers. Null topics ask for every partition; a named partition
//! that is not stored here is left out.
//!
//! Must never: report a partition this broker does not store.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    DescribeLogDirsRequest, DescribeLogDirsResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::partition::topics::Topic;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// First version with the top-level error code.
const ERROR_CODE_VERSION_MIN: i16 = 3;
/// First version with the directory's total and usable bytes.
const DISK_SPACE_VERSION_MIN: i16 = 4;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    if !access.allows_cluster(Operation::Describe) {
        let response = DescribeLogDirsResponse::default();
        return if version >= ERROR_CODE_VERSION_MIN {
            response.with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
        } else {
            response
        };
    }
    let wanted: Vec<(std::sync::Arc<Topic>, Vec<i32>)> = match request.topics {
        None => ctx
            .topics
            .all()
            .into_iter()
            .map(|topic| {
                let partitions = topic.partitions.iter().map(|p| p.index()).collect();
                (topic, partitions)
            })
            .collect(),
        Some(asked) => asked
            .into_iter()
            .filter_map(|asked| {
                let topic = ctx.topics.get(asked.topic.0.as_str())?;
                Some((topic, asked.partitions))
            })
            .collect(),
    };
    let log_dir = ctx.config.log_dirs.clone();
    // Sizes and statvfs touch the file system: a blocking thread's work.
    let described = tokio::task::spawn_blocking(move || describe(&log_dir, &wanted, version))
        .await
        .unwrap_or_else(|_| {
            DescribeLogDirsResult::default().with_error_code(error_code::KAFKA_STORAGE_ERROR)
        });
    DescribeLogDirsResponse::default().with_results(vec![described])
}

/// The one directory's entry: its absolute path, the partitions and (v4) its disk space.
fn describe(
    log_dir: &std::path::Path,
    wanted: &[(std::sync::Arc<Topic>, Vec<i32>)],
    version: i16,
) -> DescribeLogDirsResult {
    let path = std::fs::canonicalize(log_dir).unwrap_or_else(|_| log_dir.to_owned());
    let mut topics = Vec::new();
    for (topic, indexes) in wanted {
        let partitions: Vec<DescribeLogDirsPartition> = indexes
            .iter()
            .filter_map(|index| {
                let partition = topic.partition(*index)?;
                let size = partition.log().size_bytes().ok()?;
                Some(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(*index)
                        .with_partition_size(i64::try_from(size).unwrap_or(i64::MAX))
                        .with_offset_lag(0)
                        .with_is_future_key(false),
                )
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(partitions),
            );
        }
    }
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(path.display().to_string()))
        .with_topics(topics);
    // Without statvfs the fields keep Kafka's "unknown" (−1).
    if let Some((usable, total)) = (version >= DISK_SPACE_VERSION_MIN)
        .then(|| crate::placement::sampler::disk_space(&path))
        .flatten()
    {
        let bytes = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        result = result
            .with_total_bytes(bytes(total))
            .with_usable_bytes(bytes(usable));
    }
    result
}
