//! A coordinator for the consumer-group tests (`consumer_coord.rs`, `migration.rs`): one topic
//! "t" of four partitions, offsets loaded, requests numbered, time at 1 s.

use std::collections::BTreeMap;

use crate::consumer::{MigrationPolicy, TopicId, TopicImage};
use crate::{Coordinator, GroupConfig, GroupKeys, Output, RequestMeta};

/// The topic's id.
pub(crate) const TOPIC: TopicId = TopicId([7; 16]);

pub(crate) struct H {
    pub(crate) coordinator: Coordinator,
    pub(crate) next_request: u64,
    pub(crate) now_ms: i64,
}

impl H {
    pub(crate) fn new() -> Self {
        Self::with_policy(MigrationPolicy::default())
    }

    pub(crate) fn with_policy(policy: MigrationPolicy) -> Self {
        let mut config = GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, 3);
        config.consumer.migration_policy = policy;
        let mut coordinator = Coordinator::new(config);
        coordinator.load_offsets([]);
        coordinator.set_topic_image(TopicImage {
            version: 1,
            by_name: BTreeMap::from([("t".to_owned(), (TOPIC, 4))]),
        });
        assert_eq!(coordinator.next_deadline_ms(), None);
        Self {
            coordinator,
            next_request: 0,
            now_ms: 1_000,
        }
    }

    pub(crate) fn meta(&mut self, version: i16) -> RequestMeta {
        self.next_request += 1;
        RequestMeta {
            request_id: self.next_request,
            version,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    pub(crate) fn outputs(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.coordinator.poll_output()).collect()
    }
}
