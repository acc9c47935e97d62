//! [`Ctx`]: the broker-wide state the request path shares, built once at start-up and handed to
//! every connection and handler behind an `Arc`: the configuration, the topics and their
//! partitions, the metrics, the request-bytes budget, the cluster handle (membership, the
//! image, the controller), the inter-broker client and the cluster id, the placement state, the group driver's handle,
//! the shutdown signal, the queue of ISR proposals for the replication driver, the live
//! ACLs and the security store (the cluster's ACLs and users in the metadata store), the client quotas and the dynamic broker configs. It also answers two questions every handler asks: what time it is (through
//! `crate::clock`) and what this session may do in this request ([`Ctx::access`]).
//!
//! Long-polling fetches wait on their own partitions' [`crate::partition::readable_end`], not on
//! anything here.
//!
//! Must never: hold per-request or per-connection state (that is the session and the handler's
//! locals), read a clock itself, or grow a field only one module needs (pass that module its
//! own handle instead).

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use crate::config::Config;
use crate::group::driver::GroupHandle;
use crate::metrics::Metrics;
use crate::partition::topics::Topics;
use crate::security::acl::Access;
use crate::security::session::Session;

/// Shared broker state.
pub(crate) struct Ctx {
    pub(crate) config: Arc<Config>,
    pub(crate) topics: Arc<Topics>,
    pub(crate) metrics: Arc<Metrics>,
    /// Bytes of request frames held by all connections together (`queued.max.request.bytes`).
    pub(crate) request_bytes_budget: Semaphore,
    /// The cluster id Metadata reports (`R/cluster` in the metadata store).
    pub(crate) cluster_id: String,
    /// Membership, the controller, and this broker's image of the metadata store.
    pub(crate) cluster: crate::cluster::ClusterHandle,
    /// Requests to other brokers (transaction markers, KIP-890 checks with a coordinator).
    pub(crate) interbroker: crate::interbroker::InterBrokerClient,
    /// Replica assignment, bundles and this node's load.
    pub(crate) placement: crate::placement::state::PlacementState,
    /// The group coordinator task.
    pub(crate) groups: GroupHandle,
    /// The transaction coordinator task (it also hands out every producer id).
    pub(crate) txns: crate::txn::driver::TxnHandle,
    /// Turns true when the broker shuts down: connections finish their response and close,
    /// long-polling fetches answer at once, background tasks stop.
    pub(crate) shutdown: watch::Sender<bool>,
    /// Where follower fetches hand their leaders' ISR proposals to the replica driver.
    pub(crate) isr_proposals: crate::partition::replica::ProposalSender,
    /// The live ACLs; `None` when authorization is off.
    pub(crate) acl: Option<Arc<crate::security::acl::AclState>>,
    /// The cluster's ACLs and SCRAM users in the metadata store: the admin APIs' reads and writes.
    pub(crate) security: Arc<crate::cluster::security_store::SecurityStore>,
    /// Client quotas as last applied from the metadata store, and their sensors.
    pub(crate) quotas: Arc<crate::quota::ClientQuotas>,
    /// Dynamic broker configs as last applied from the metadata store.
    pub(crate) dynamic: Arc<crate::dynamic::DynamicConfigs>,
    /// The acceptors of the TLS listeners, replaced live when a keystore changes.
    pub(crate) tls_listeners: Vec<Arc<crate::tls::live::LiveAcceptor>>,
}

impl Ctx {
    /// What creating or growing a topic needs of this broker.
    pub(crate) fn topic_creation(&self) -> crate::cluster::topic_creation::TopicCreation<'_> {
        crate::cluster::topic_creation::TopicCreation {
            cluster: &self.cluster,
            topics: &self.topics,
            placement: &self.placement,
            config: &self.config,
        }
    }

    /// A monotonic instant, for measuring how long something took (request latency).
    pub(crate) fn instant(&self) -> std::time::Instant {
        crate::clock::instant()
    }

    /// Milliseconds since the Unix epoch: the broker's one wall clock (for log-append times,
    /// segment age and retention), read here and passed to storage as an argument.
    pub(crate) fn now_ms(&self) -> i64 {
        crate::clock::now_ms()
    }

    /// What `session`'s principal may do in one request of `api_key`: each handler asks this
    /// once and runs its checks against it.
    pub(crate) fn access<'a>(&'a self, session: &'a Session, api_key: i16) -> Access<'a> {
        Access::new(self.acl.as_deref(), &self.metrics, session, api_key)
    }
}
