//! One request's side of the client quotas: who it is from, how long the broker's threads have
//! spent polling it (what `request_percentage` counts), and the throttle it has earned so far —
//! the largest of its request-time, byte-rate and mutation throttles, as Kafka answers it
//! (`throttle_time_ms` is the largest, and the connection is muted for it).
//!
//! [`Busy`] measures the time spent inside `poll` of the request's future ([`Timed`] wraps it):
//! waiting for records, replication or the disk is not counted, decoding, handling and encoding
//! are (Kafka counts its request handler thread's time).
//!
//! Must never: record a request's time twice, or throttle a follower's Fetch or the SASL exchange.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::quota::entity::QuotaKey;
use crate::quota::{Client, ClientQuotas, Mutation};

/// Time spent polling one request: what finished polls took, and when the current one began.
#[derive(Debug, Default)]
pub(crate) struct Busy {
    done_ns: AtomicU64,
    polling_since: Mutex<Option<Instant>>,
}

impl Busy {
    /// Polling time so far, the current poll included.
    fn so_far(&self) -> Duration {
        let done = Duration::from_nanos(self.done_ns.load(Ordering::Relaxed));
        let current = self
            .polling_since
            .lock()
            .ok()
            .and_then(|since| since.map(|since| since.elapsed()))
            .unwrap_or_default();
        done + current
    }
}

/// A future whose polls are added to a [`Busy`].
pub(crate) struct Timed<'a, F> {
    inner: Pin<&'a mut F>,
    busy: &'a Busy,
}

impl<'a, F> Timed<'a, F> {
    pub(crate) fn new(inner: Pin<&'a mut F>, busy: &'a Busy) -> Self {
        Self { inner, busy }
    }
}

impl<F: Future> Future for Timed<'_, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let started = crate::clock::instant();
        if let Ok(mut since) = self.busy.polling_since.lock() {
            *since = Some(started);
        }
        let answer = self.inner.as_mut().poll(cx);
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.busy.done_ns.fetch_add(spent, Ordering::Relaxed);
        if let Ok(mut since) = self.busy.polling_since.lock() {
            *since = None;
        }
        answer
    }
}

/// One request's quota turn.
pub(crate) struct Turn<'a> {
    quotas: &'a ClientQuotas,
    user: &'a str,
    client_id: &'a str,
    busy: &'a Busy,
    /// The request frame's bytes (what `producer_byte_rate` counts of a Produce).
    request_bytes: usize,
    /// Not counted against `request_percentage` (the SASL exchange, a follower's Fetch).
    exempt: AtomicBool,
    request_recorded: AtomicBool,
    throttle_ms: AtomicU64,
}

impl<'a> Turn<'a> {
    pub(crate) fn new(
        quotas: &'a ClientQuotas,
        user: &'a str,
        client_id: &'a str,
        busy: &'a Busy,
        request_bytes: usize,
    ) -> Self {
        Self {
            quotas,
            user,
            client_id,
            busy,
            request_bytes,
            exempt: AtomicBool::new(false),
            request_recorded: AtomicBool::new(false),
            throttle_ms: AtomicU64::new(0),
        }
    }

    fn client(&self) -> Client<'_> {
        Client {
            user: self.user,
            client_id: self.client_id,
        }
    }

    fn raise(&self, throttle_ms: u64) -> u64 {
        self.throttle_ms.fetch_max(throttle_ms, Ordering::Relaxed);
        self.throttle_ms()
    }

    /// The throttle earned so far.
    pub(crate) fn throttle_ms(&self) -> u64 {
        self.throttle_ms.load(Ordering::Relaxed)
    }

    /// As the `throttle_time_ms` field carries it.
    pub(crate) fn throttle_field(&self) -> i32 {
        i32::try_from(self.throttle_ms()).unwrap_or(i32::MAX)
    }

    /// Leaves this request out of `request_percentage` (a follower's Fetch: replication is not a
    /// client).
    pub(crate) fn exempt(&self) {
        self.exempt.store(true, Ordering::Relaxed);
    }

    /// Records the request's polling time so far, once, and returns the throttle earned.
    pub(crate) fn finish_request_time(&self) -> u64 {
        if !self.quotas.active()
            || self.exempt.load(Ordering::Relaxed)
            || self.request_recorded.swap(true, Ordering::Relaxed)
        {
            return self.throttle_ms();
        }
        let now_ms = self.quotas.now_ms();
        let throttle = self
            .quotas
            .record_request_time(self.client(), self.busy.so_far(), now_ms);
        self.raise(throttle)
    }

    /// Records the Produce request's bytes (`producer_byte_rate`).
    pub(crate) fn record_produce(&self) -> u64 {
        if !self.quotas.active() {
            return self.throttle_ms();
        }
        let bytes = self.request_bytes;
        let now_ms = self.quotas.now_ms();
        let throttle = self.quotas.record(
            QuotaKey::ProducerByteRate,
            self.client(),
            bytes as f64,
            now_ms,
        );
        self.raise(throttle)
    }

    /// Records a Fetch response's bytes (`consumer_byte_rate`) and the request's time, and says
    /// whether the response must go without records: then the bytes are taken back, as Kafka
    /// takes them back from a throttled Fetch it answers empty.
    pub(crate) fn fetch_throttled(&self, bytes: usize) -> bool {
        if !self.quotas.active() {
            return false;
        }
        let now_ms = self.quotas.now_ms();
        let client = self.client();
        let bandwidth =
            self.quotas
                .record(QuotaKey::ConsumerByteRate, client, bytes as f64, now_ms);
        let request = self.finish_request_time();
        let throttled = bandwidth.max(request) > 0;
        if throttled {
            self.quotas
                .unrecord(QuotaKey::ConsumerByteRate, client, bytes as f64, now_ms);
        }
        self.raise(bandwidth);
        throttled
    }

    /// Before a topic is created, grown or deleted: in strict mode (the versions that know
    /// THROTTLING_QUOTA_EXCEEDED) Kafka's refusal when the client's mutation quota is exhausted;
    /// `None` to go ahead.
    pub(crate) fn mutation_refused(&self, strict: bool) -> Option<(i16, String)> {
        if !strict {
            return None;
        }
        match self
            .quotas
            .check_mutation(self.client(), self.quotas.now_ms())
        {
            Mutation::Allowed => None,
            Mutation::Exceeded { throttle_ms } => {
                self.raise(throttle_ms);
                Some((
                    crate::handlers::error_code::THROTTLING_QUOTA_EXCEEDED,
                    "The throttling quota has been exceeded.".to_owned(),
                ))
            }
        }
    }

    /// After `partitions` were created, added or deleted.
    pub(crate) fn record_mutation(&self, partitions: usize) {
        let now_ms = self.quotas.now_ms();
        let throttle = self
            .quotas
            .record_mutation(self.client(), partitions as f64, now_ms);
        self.raise(throttle);
    }
}

/// A response whose `throttle_time_ms` the dispatch fills in (a no-op for the few without one:
/// their versions predate KIP-219 or they are never throttled).
pub(crate) trait ThrottleField {
    /// Sets `throttle_time_ms`.
    fn set_throttle_time_ms(&mut self, ms: i32);
}

macro_rules! throttle_fields {
    ($($ty:ident),* $(,)?) => {$(
        impl ThrottleField for kafka_protocol::messages::$ty {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        }
    )*};
}

throttle_fields!(
    ProduceResponse,
    ListOffsetsResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DeleteRecordsResponse,
    InitProducerIdResponse,
    OffsetForLeaderEpochResponse,
    DescribeConfigsResponse,
    AlterConfigsResponse,
    DescribeLogDirsResponse,
    CreatePartitionsResponse,
    DeleteGroupsResponse,
    ElectLeadersResponse,
    IncrementalAlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    OffsetDeleteResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    DescribeAclsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeUserScramCredentialsResponse,
    AlterUserScramCredentialsResponse,
    AddPartitionsToTxnResponse,
    AddOffsetsToTxnResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
    DescribeProducersResponse,
);

// EndTxn's response is Skiff's own type: kafka-protocol 0.15.1 cannot encode its v5.
impl ThrottleField for skiff_protocol::responses::end_txn::EndTxnResponse {
    fn set_throttle_time_ms(&mut self, ms: i32) {
        self.throttle_time_ms = ms;
    }
}

// DescribeCluster's response is Skiff's own type: kafka-protocol 0.15.1 cannot encode its v2.
impl ThrottleField for skiff_protocol::responses::describe_cluster::DescribeClusterResponse {
    fn set_throttle_time_ms(&mut self, ms: i32) {
        self.base.throttle_time_ms = ms;
    }
}

// The KIP-848 responses are Skiff's own types: kafka-protocol 0.15.1 encodes only their v0.
impl ThrottleField for skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse {
    fn set_throttle_time_ms(&mut self, ms: i32) {
        self.throttle_time_ms = ms;
    }
}

impl ThrottleField for skiff_protocol::responses::consumer_group::ConsumerGroupDescribeResponse {
    fn set_throttle_time_ms(&mut self, ms: i32) {
        self.throttle_time_ms = ms;
    }
}

impl ThrottleField for kafka_protocol::messages::SaslHandshakeResponse {
    fn set_throttle_time_ms(&mut self, _ms: i32) {}
}

impl ThrottleField for kafka_protocol::messages::SaslAuthenticateResponse {
    fn set_throttle_time_ms(&mut self, _ms: i32) {}
}

/// Inter-broker: WriteTxnMarkers has no throttle field (Kafka never throttles it).
impl ThrottleField for kafka_protocol::messages::WriteTxnMarkersResponse {
    fn set_throttle_time_ms(&mut self, _ms: i32) {}
}
