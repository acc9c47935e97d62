//! The etcd backend (cargo feature `etcd`): [`MetaStore`](crate::MetaStore)'s semantics on a real
//! etcd cluster through `etcd-client`, with the failure handling docs/design/cluster.md §8 found
//! necessary on etcd 3.4.23:
//!
//! - A dead member stays in the client's balanced channel, so about a third of calls fail with
//!   `Unavailable` after a member dies. Reads, guarded Txns, lease grants, keep-alives and
//!   revokes are retried with exponential backoff for [`EtcdOptions::retry_timeout`]; an
//!   unguarded write is not (it might have been applied) and surfaces [`Error::Unavailable`].
//! - Streams are pinned to one member and not re-established by the crate: a watch that breaks
//!   is re-opened on any member from the last delivered revision + 1, so no event is lost or
//!   repeated; a keep-alive stream that breaks or stalls is re-opened.
//! - A watch canceled because its start revision was compacted ends with
//!   [`Error::Compacted`] carrying etcd's compact revision: the caller re-GETs.
//! - Unary calls carry a request timeout; streams use a separate client without one (a client
//!   timeout cancels long streams, gotcha 5) and rely on HTTP/2 keep-alive to notice a dead peer.
//!   Every request asks for a member with a leader, so a partitioned member's watch is canceled
//!   instead of going silent.
//!
//! It owns no state beyond the clients and the keep-alive streams: everything lives in etcd.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client as ec;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use crate::limits;
use crate::types::{
    validate_ttl, validate_watch, CompareOp, CompareTarget, Event, EventKind, GetRequest,
    GetResponse, KeyRange, KeyValue, Lease, LeaseId, LeaseStatus, Txn, TxnOp, TxnOpResponse,
    TxnResponse, WatchBatch,
};

/// Longest wait between two retries of one call.
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// First wait before retrying a call.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// How to reach etcd and how long to insist.
#[derive(Clone, Debug)]
pub struct EtcdOptions {
    /// `host:port` of each member.
    pub endpoints: Vec<String>,
    /// Limit on one unary call (etcd's own request timeout is 5 s with a 1 s election).
    pub request_timeout: Duration,
    /// How long a retriable call is retried before [`Error::Unavailable`].
    pub retry_timeout: Duration,
    /// HTTP/2 keep-alive ping interval, which detects a dead member under a stream.
    pub keep_alive_interval: Duration,
}

impl EtcdOptions {
    /// Defaults for `endpoints`: 3 s per request, 10 s of retries, 2 s keep-alive pings.
    pub fn new(endpoints: Vec<String>) -> Self {
        Self {
            endpoints,
            request_timeout: Duration::from_secs(3),
            retry_timeout: Duration::from_secs(10),
            keep_alive_interval: Duration::from_secs(2),
        }
    }
}

/// A metadata store on an etcd cluster. Cheap to clone.
#[derive(Clone)]
pub struct EtcdStore {
    shared: Arc<Shared>,
}

struct Shared {
    options: EtcdOptions,
    /// For unary calls: carries the request timeout.
    unary: ec::Client,
    /// For watch and keep-alive streams: no request timeout.
    streams: ec::Client,
    /// One keep-alive stream per lease kept alive through this store.
    keepers: Mutex<HashMap<LeaseId, (ec::LeaseKeeper, ec::LeaseKeepAliveStream)>>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.shared.options.endpoints)
            .finish()
    }
}

/// How a call may be retried after a failure that leaves its outcome unknown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Reads, guarded writes, lease calls: retry until the retry timeout.
    Safe,
    /// Unguarded writes: a second attempt could apply twice; fail at once.
    Never,
}

impl EtcdStore {
    /// Connects to the cluster, retrying for [`EtcdOptions::retry_timeout`]; the error names the
    /// endpoints.
    pub async fn connect(options: EtcdOptions) -> Result<Self> {
        if options.endpoints.is_empty() {
            return Err(Error::InvalidArgument("no etcd endpoints".into()));
        }
        let connect_options = |timeout: Option<Duration>| {
            let mut connect = ec::ConnectOptions::new()
                .with_connect_timeout(options.request_timeout)
                .with_keep_alive(options.keep_alive_interval, options.request_timeout)
                .with_keep_alive_while_idle(true)
                .with_require_leader(true);
            if let Some(timeout) = timeout {
                connect = connect.with_timeout(timeout);
            }
            connect
        };
        let deadline = Instant::now() + options.retry_timeout;
        let mut backoff = RETRY_BACKOFF_MIN;
        let (unary, streams) = loop {
            let attempt = async {
                let unary = ec::Client::connect(
                    &options.endpoints,
                    Some(connect_options(Some(options.request_timeout))),
                )
                .await?;
                let streams =
                    ec::Client::connect(&options.endpoints, Some(connect_options(None))).await?;
                Ok::<_, ec::Error>((unary, streams))
            };
            match attempt.await {
                Ok(clients) => break clients,
                Err(error) if Instant::now() + backoff < deadline => {
                    tracing::debug!(%error, "connecting to etcd, retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
                Err(error) => {
                    return Err(Error::Unavailable {
                        reason: format!(
                            "cannot connect to etcd at {}: {error}",
                            options.endpoints.join(",")
                        ),
                    })
                }
            }
        };
        let store = Self {
            shared: Arc::new(Shared {
                options,
                unary,
                streams,
                keepers: Mutex::new(HashMap::new()),
            }),
        };
        // Prove the cluster answers before handing the store out.
        store.get(GetRequest::key("/")).await?;
        Ok(store)
    }

    /// Runs `call` on a fresh clone of the unary client, retrying per `retry`.
    async fn call<T, F, Fut>(&self, retry: Retry, mut call: F) -> Result<T>
    where
        F: FnMut(ec::Client) -> Fut,
        Fut: std::future::Future<Output = Result<T, ec::Error>>,
    {
        let deadline = Instant::now() + self.shared.options.retry_timeout;
        let mut backoff = RETRY_BACKOFF_MIN;
        loop {
            let (error, sent) = match call(self.shared.unary.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(error) => {
                    let sent = !never_sent(&error);
                    (map_error(error), sent)
                }
            };
            let retriable = error.is_retriable() && (retry == Retry::Safe || !sent);
            if !retriable || Instant::now() + backoff >= deadline {
                return Err(self.name_endpoints(error));
            }
            tracing::debug!(%error, "etcd call failed, retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    fn name_endpoints(&self, error: Error) -> Error {
        match error {
            Error::Unavailable { reason } => Error::Unavailable {
                reason: format!(
                    "etcd at {}: {reason}",
                    self.shared.options.endpoints.join(",")
                ),
            },
            other => other,
        }
    }

    /// Reads a key or prefix.
    pub async fn get(&self, request: GetRequest) -> Result<GetResponse> {
        request.validate()?;
        let mut response = self
            .call(Retry::Safe, |mut client| {
                let request = request.clone();
                async move {
                    let key = request.range.start().to_vec();
                    client
                        .get(
                            key,
                            Some(get_options(&request.range, request.revision, request.limit)),
                        )
                        .await
                }
            })
            .await
            .map_err(|error| with_requested(error, request.revision))?;
        let count = usize::try_from(response.count()).unwrap_or(0);
        Ok(GetResponse {
            revision: header_revision(response.header()),
            more: response.more(),
            count,
            kvs: response.take_kvs().into_iter().map(key_value).collect(),
        })
    }

    /// Runs a Txn; retried after a failure only when [`Txn::is_retry_safe`].
    pub async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        txn.validate()?;
        let retry = if txn.is_retry_safe() {
            Retry::Safe
        } else {
            Retry::Never
        };
        let response = self
            .call(retry, |mut client| {
                let request = etcd_txn(&txn);
                async move { client.txn(request).await }
            })
            .await
            // Only a put names a lease in a Txn; etcd does not say which.
            .map_err(|error| with_lease(error, txn_lease(&txn).unwrap_or_default()))?;
        let responses = response
            .op_responses()
            .into_iter()
            .map(|op| match op {
                ec::TxnOpResponse::Put(mut put) => TxnOpResponse::Put {
                    prev_kv: put.take_prev_key().map(key_value),
                },
                ec::TxnOpResponse::Delete(mut delete) => TxnOpResponse::Delete {
                    prev_kvs: delete.take_prev_kvs().into_iter().map(key_value).collect(),
                },
                ec::TxnOpResponse::Get(mut get) => TxnOpResponse::Get {
                    kvs: get.take_kvs().into_iter().map(key_value).collect(),
                },
                // Never sent: this store builds no nested Txns.
                ec::TxnOpResponse::Txn(_) => TxnOpResponse::Get { kvs: Vec::new() },
            })
            .collect();
        Ok(TxnResponse {
            succeeded: response.succeeded(),
            revision: header_revision(response.header()),
            responses,
        })
    }

    /// Compacts etcd's history up to `revision`.
    pub async fn compact(&self, revision: i64) -> Result<()> {
        self.call(Retry::Safe, |mut client| async move {
            client.compact(revision, None).await
        })
        .await
        .map(|_| ())
        .map_err(|error| with_requested(error, revision))
    }

    /// Watches a range from `start_revision` (`0`: from the next revision).
    pub async fn watch(&self, range: KeyRange, start_revision: i64) -> Result<EtcdWatcher> {
        validate_watch(&range, start_revision)?;
        let next_revision = if start_revision == 0 {
            self.get(GetRequest {
                range: range.clone(),
                revision: 0,
                limit: 1,
            })
            .await?
            .revision
                + 1
        } else {
            start_revision
        };
        let mut watcher = EtcdWatcher {
            store: self.clone(),
            range,
            next_revision,
            stream: None,
            ready: VecDeque::new(),
        };
        watcher.open().await?;
        Ok(watcher)
    }

    /// Grants a lease of `ttl_secs`.
    pub async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        validate_ttl(ttl_secs)?;
        // A retry after an ambiguous failure may leak one lease; it expires on its own.
        let response = self
            .call(Retry::Safe, |mut client| async move {
                client.lease_grant(ttl_secs, None).await
            })
            .await?;
        Ok(Lease {
            id: response.id(),
            ttl_secs: response.ttl(),
        })
    }

    /// Renews a lease through its keep-alive stream, re-opening the stream when it broke.
    pub async fn lease_keep_alive(&self, id: LeaseId) -> Result<i64> {
        let deadline = Instant::now() + self.shared.options.retry_timeout;
        let mut backoff = RETRY_BACKOFF_MIN;
        let mut keepers = self.shared.keepers.lock().await;
        loop {
            let error = match self.keep_alive_once(&mut keepers, id).await {
                Ok(ttl) => return Ok(ttl),
                Err(error) => error,
            };
            keepers.remove(&id);
            if !error.is_retriable() || Instant::now() + backoff >= deadline {
                return Err(self.name_endpoints(error));
            }
            tracing::debug!(%error, lease = id, "etcd keep-alive failed, re-opening its stream");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    async fn keep_alive_once(
        &self,
        keepers: &mut HashMap<LeaseId, (ec::LeaseKeeper, ec::LeaseKeepAliveStream)>,
        id: LeaseId,
    ) -> Result<i64> {
        if !keepers.contains_key(&id) {
            if keepers.len() >= limits::LEASES_MAX {
                return Err(Error::QuotaExceeded {
                    what: "kept-alive leases",
                    max: limits::LEASES_MAX,
                });
            }
            let mut client = self.shared.streams.clone();
            let opened = tokio::time::timeout(
                self.shared.options.request_timeout,
                client.lease_keep_alive(id),
            )
            .await
            .map_err(|_| Error::Unavailable {
                reason: "keep-alive stream open timed out".into(),
            })?;
            let (keeper, stream) = opened.map_err(|error| match error {
                ec::Error::LeaseKeepAliveError(message) if message.contains("not found") => {
                    Error::LeaseNotFound { lease: id }
                }
                other => map_error(other),
            })?;
            keepers.insert(id, (keeper, stream));
        }
        let Some((keeper, stream)) = keepers.get_mut(&id) else {
            return Err(Error::Unavailable {
                reason: "keep-alive stream vanished".into(),
            });
        };
        keeper.keep_alive().await.map_err(map_error)?;
        let answer = tokio::time::timeout(self.shared.options.request_timeout, stream.message())
            .await
            .map_err(|_| Error::Unavailable {
                reason: "keep-alive answer timed out".into(),
            })?
            .map_err(map_error)?;
        match answer {
            Some(response) if response.ttl() > 0 => Ok(response.ttl()),
            Some(_) => Err(Error::LeaseNotFound { lease: id }),
            None => Err(Error::Unavailable {
                reason: "keep-alive stream closed".into(),
            }),
        }
    }

    /// Ends a lease; its keys are deleted.
    pub async fn lease_revoke(&self, id: LeaseId) -> Result<()> {
        self.shared.keepers.lock().await.remove(&id);
        let mut attempts = 0;
        let result = self
            .call(Retry::Safe, |mut client| {
                attempts += 1;
                async move { client.lease_revoke(id).await }
            })
            .await;
        match result {
            // A retry of a revoke that was applied the first time: the lease is gone, as wanted.
            Err(Error::LeaseNotFound { .. }) if attempts > 1 => Ok(()),
            other => other.map(|_| ()).map_err(|error| with_lease(error, id)),
        }
    }

    /// A lease's granted and remaining TTL.
    pub async fn lease_status(&self, id: LeaseId) -> Result<LeaseStatus> {
        let response = self
            .call(Retry::Safe, |mut client| async move {
                client.lease_time_to_live(id, None).await
            })
            .await
            .map_err(|error| with_lease(error, id))?;
        if response.ttl() < 0 {
            return Err(Error::LeaseNotFound { lease: id });
        }
        Ok(LeaseStatus {
            id,
            granted_ttl_secs: response.granted_ttl(),
            remaining_ttl_secs: response.ttl(),
        })
    }
}

/// A watch on etcd that survives member failures (see the module docs). Dropping it closes its
/// stream.
pub struct EtcdWatcher {
    store: EtcdStore,
    range: KeyRange,
    /// The first revision not yet queued: where a re-opened stream starts.
    next_revision: i64,
    stream: Option<ec::WatchStream>,
    ready: VecDeque<WatchBatch>,
}

impl std::fmt::Debug for EtcdWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdWatcher")
            .field("range", &self.range)
            .field("next_revision", &self.next_revision)
            .finish()
    }
}

impl EtcdWatcher {
    /// Opens a stream from `next_revision`, retrying on any member.
    async fn open(&mut self) -> Result<()> {
        let options = ec::WatchOptions::new()
            .with_start_revision(self.next_revision)
            .with_prev_key()
            .with_progress_notify();
        let options = match &self.range {
            KeyRange::Key(_) => options,
            KeyRange::Prefix(_) => options.with_prefix(),
        };
        let key = self.range.start().to_vec();
        let deadline = Instant::now() + self.store.shared.options.retry_timeout;
        let mut backoff = RETRY_BACKOFF_MIN;
        loop {
            let mut client = self.store.shared.streams.clone();
            let opened = tokio::time::timeout(
                self.store.shared.options.request_timeout,
                client.watch(key.clone(), Some(options.clone())),
            )
            .await;
            let error = match opened {
                Ok(Ok(stream)) => {
                    self.stream = Some(stream);
                    return Ok(());
                }
                Ok(Err(error)) => map_error(error),
                Err(_) => Error::Unavailable {
                    reason: "watch open timed out".into(),
                },
            };
            if !error.is_retriable() || Instant::now() + backoff >= deadline {
                return Err(self.store.name_endpoints(error));
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
        }
    }

    /// The events of the next revision that touched the range. A broken stream is resumed from
    /// the last delivered revision + 1 on any member; [`Error::Compacted`] ends the watch;
    /// [`Error::Unavailable`] after [`EtcdOptions::retry_timeout`] without any member.
    pub async fn next(&mut self) -> Result<WatchBatch> {
        // Since when streams have been breaking without delivering anything: a watch that cannot
        // be kept open for the retry timeout gives up instead of spinning forever.
        let mut failing_since: Option<Instant> = None;
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Ok(batch);
            }
            if self.stream.is_none() {
                self.open().await?;
            }
            let Some(stream) = self.stream.as_mut() else {
                continue;
            };
            let reason = match stream.message().await {
                Ok(Some(message)) if !message.canceled() => {
                    failing_since = None;
                    self.queue(message.events());
                    continue;
                }
                Ok(Some(message)) if message.compact_revision() > 0 => {
                    self.stream = None;
                    return Err(Error::Compacted {
                        requested_revision: self.next_revision,
                        compact_revision: Some(message.compact_revision()),
                    });
                }
                // Canceled for another reason (e.g. the member lost its leader).
                Ok(Some(message)) => format!("canceled: {}", message.cancel_reason()),
                // The member died or closed the stream.
                Ok(None) => "stream closed".to_owned(),
                Err(error) => error.to_string(),
            };
            self.stream = None;
            let since = *failing_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= self.store.shared.options.retry_timeout {
                return Err(self.store.name_endpoints(Error::Unavailable {
                    reason: format!("watch keeps breaking: {reason}"),
                }));
            }
            tracing::debug!(next_revision = self.next_revision, %reason, "etcd watch broke, resuming");
            tokio::time::sleep(RETRY_BACKOFF_MIN).await;
        }
    }

    /// Groups events into one batch per revision, dropping any already queued (a resumed
    /// stream starts exactly at next_revision, so this is a guard, not a normal path).
    fn queue(&mut self, events: &[ec::Event]) {
        let mut batches: BTreeMap<i64, Vec<Event>> = BTreeMap::new();
        for event in events {
            let Some(kv) = event.kv() else { continue };
            let revision = kv.mod_revision();
            if revision < self.next_revision {
                continue;
            }
            // etcd sets a deleted key's version to 0 and a live key's to ≥ 1; reading the kind
            // from it avoids `Event::event_type`, which panics on an unknown type number.
            let kind = if kv.version() == 0 {
                EventKind::Delete
            } else {
                EventKind::Put
            };
            batches.entry(revision).or_default().push(Event {
                kind,
                kv: key_value(kv.clone()),
                prev_kv: event.prev_kv().cloned().map(key_value),
            });
        }
        for (revision, events) in batches {
            debug_assert!(revision >= self.next_revision);
            self.next_revision = revision + 1;
            self.ready.push_back(WatchBatch { revision, events });
        }
    }
}

/// The first lease a Txn's puts name (for the error when etcd does not find it).
fn txn_lease(txn: &Txn) -> Option<LeaseId> {
    txn.success
        .iter()
        .chain(&txn.failure)
        .find_map(|op| match op {
            TxnOp::Put { lease, .. } if *lease != crate::types::NO_LEASE => Some(*lease),
            _ => None,
        })
}

fn get_options(range: &KeyRange, revision: i64, limit: usize) -> ec::GetOptions {
    let mut options = ec::GetOptions::new()
        .with_revision(revision)
        .with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
    if let KeyRange::Prefix(_) = range {
        options = options.with_prefix();
    }
    options
}

fn etcd_txn(txn: &Txn) -> ec::Txn {
    let compares: Vec<ec::Compare> = txn
        .compares
        .iter()
        .map(|compare| {
            let op = match compare.op {
                CompareOp::Equal => ec::CompareOp::Equal,
                CompareOp::NotEqual => ec::CompareOp::NotEqual,
                CompareOp::Greater => ec::CompareOp::Greater,
                CompareOp::Less => ec::CompareOp::Less,
            };
            let key = compare.key.clone();
            match &compare.target {
                CompareTarget::CreateRevision(value) => {
                    ec::Compare::create_revision(key, op, *value)
                }
                CompareTarget::ModRevision(value) => ec::Compare::mod_revision(key, op, *value),
                CompareTarget::Version(value) => ec::Compare::version(key, op, *value),
                CompareTarget::Value(value) => ec::Compare::value(key, op, value.clone()),
                CompareTarget::Lease(value) => ec::Compare::lease(key, op, *value),
            }
        })
        .collect();
    ec::Txn::new()
        .when(compares)
        .and_then(etcd_ops(&txn.success))
        .or_else(etcd_ops(&txn.failure))
}

fn etcd_ops(ops: &[TxnOp]) -> Vec<ec::TxnOp> {
    ops.iter()
        .map(|op| match op {
            TxnOp::Put { key, value, lease } => {
                let options = ec::PutOptions::new().with_prev_key().with_lease(*lease);
                ec::TxnOp::put(key.clone(), value.clone(), Some(options))
            }
            TxnOp::Delete(range) => {
                let mut options = ec::DeleteOptions::new().with_prev_key();
                if let KeyRange::Prefix(_) = range {
                    options = options.with_prefix();
                }
                ec::TxnOp::delete(range.start().to_vec(), Some(options))
            }
            TxnOp::Get(range) => {
                ec::TxnOp::get(range.start().to_vec(), Some(get_options(range, 0, 0)))
            }
        })
        .collect()
}

fn key_value(kv: ec::KeyValue) -> KeyValue {
    let (create_revision, mod_revision, version, lease) = (
        kv.create_revision(),
        kv.mod_revision(),
        kv.version(),
        kv.lease(),
    );
    let (key, value) = kv.into_key_value();
    KeyValue {
        key,
        value,
        create_revision,
        mod_revision,
        version,
        lease,
    }
}

/// Whether the call failed before reaching any member (the dead endpoint still in the
/// balanced channel refused the connection): then even an unguarded write is safe to retry.
fn never_sent(error: &ec::Error) -> bool {
    let text = match error {
        ec::Error::TransportError(error) => error.to_string(),
        ec::Error::GRpcStatus(status) => status.message().to_owned(),
        _ => return false,
    };
    [
        "tcp connect error",
        "Connection refused",
        "error trying to connect",
    ]
    .iter()
    .any(|marker| text.contains(marker))
}

fn header_revision(header: Option<&ec::ResponseHeader>) -> i64 {
    header.map_or(0, ec::ResponseHeader::revision)
}

/// Fills in the revision asked for, which etcd's error messages do not carry.
fn with_requested(error: Error, revision: i64) -> Error {
    match error {
        Error::Compacted {
            compact_revision, ..
        } => Error::Compacted {
            requested_revision: revision,
            compact_revision,
        },
        Error::FutureRevision {
            current_revision, ..
        } => Error::FutureRevision {
            requested_revision: revision,
            current_revision,
        },
        other => other,
    }
}

/// Fills in the lease asked for, which etcd's error messages do not carry.
fn with_lease(error: Error, lease: LeaseId) -> Error {
    match error {
        Error::LeaseNotFound { .. } => Error::LeaseNotFound { lease },
        other => other,
    }
}

/// Sorts an etcd-client error into the store's error kinds by gRPC code and etcd's messages
/// (`etcdserver/api/v3rpc/rpctypes`).
fn map_error(error: ec::Error) -> Error {
    use tonic::Code;
    match error {
        ec::Error::GRpcStatus(status) => {
            let message = status.message().to_owned();
            match status.code() {
                Code::OutOfRange if message.contains("compacted") => Error::Compacted {
                    requested_revision: 0,
                    compact_revision: None,
                },
                Code::OutOfRange if message.contains("future revision") => Error::FutureRevision {
                    requested_revision: 0,
                    current_revision: 0,
                },
                Code::NotFound if message.contains("lease not found") => {
                    Error::LeaseNotFound { lease: 0 }
                }
                Code::InvalidArgument if message.contains("too many operations") => {
                    Error::TxnTooLarge {
                        ops: 0,
                        max: limits::TXN_OPS_MAX,
                    }
                }
                Code::InvalidArgument => Error::InvalidArgument(message),
                Code::ResourceExhausted => Error::QuotaExceeded {
                    what: "etcd space",
                    max: 0,
                },
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Aborted
                | Code::Unknown
                | Code::Internal => Error::Unavailable { reason: message },
                _ => Error::Etcd(format!("{:?}: {message}", status.code())),
            }
        }
        ec::Error::TransportError(error) => Error::Unavailable {
            reason: error.to_string(),
        },
        ec::Error::IoError(error) => Error::Unavailable {
            reason: error.to_string(),
        },
        ec::Error::WatchError(message) | ec::Error::LeaseKeepAliveError(message) => {
            Error::Unavailable { reason: message }
        }
        other => Error::Etcd(other.to_string()),
    }
}
