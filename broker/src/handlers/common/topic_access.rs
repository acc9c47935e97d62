//! Who may create a topic: Create on the cluster or on the topic (Kafka's rule), for CreateTopics
//! and for the auto-creation of Metadata and Produce alike.
//!
//! Must never: create anything (that is `crate::cluster::topic_creation`).

use crate::security::acl::model::CLUSTER_NAME;
use crate::security::acl::{Access, Operation, ResourceType};

/// Whether `access` may create the topic `name`: Create on the cluster or on the topic.
pub(crate) fn may_create(access: &Access<'_>, name: &str) -> bool {
    access.may(Operation::Create, ResourceType::Cluster, CLUSTER_NAME)
        || access.allows(Operation::Create, ResourceType::Topic, name)
}
