//! Which `__transaction_state` partitions this broker leads and has loaded; loading one (replaying
//! its records, then resuming the markers of every transaction left in PrepareCommit or
//! PrepareAbort) and unloading one (its ids are forgotten, requests waiting on them answered
//! NOT_COORDINATOR); and the periodic work: aborting timed-out transactions and expiring idle ids.
//!
//! Must never: serve an id of a partition that is not loaded, or keep state of a partition led
//! elsewhere.

use skiff_protocol::error_code::ErrorCode;

use crate::coordinator::{After, Coordinator, Entry, Led};
use crate::init::fence_abort;
use crate::log::TxnLogRecord;
use crate::state::TxnState;

impl Coordinator {
    /// This broker became the leader of state partition `partition` at leader epoch
    /// `coordinator_epoch`: its ids are answered COORDINATOR_LOAD_IN_PROGRESS until
    /// [`Coordinator::load_partition`]. A partition led before at another epoch is unloaded first.
    pub fn partition_led(&mut self, partition: i32, coordinator_epoch: i32) {
        if let Some(led) = self.led.get(&partition) {
            if led.coordinator_epoch == coordinator_epoch {
                return;
            }
            self.unload_partition(partition);
        }
        self.led.insert(
            partition,
            Led {
                coordinator_epoch,
                loaded: false,
            },
        );
    }

    /// The records of `partition` (oldest first, read after [`Coordinator::partition_led`] at the
    /// same epoch): the last record of an id wins and a tombstone removes it. Transactions left
    /// in PrepareCommit/PrepareAbort resume their markers. Ignored unless the partition is led at
    /// `coordinator_epoch` and not loaded yet.
    pub fn load_partition(
        &mut self,
        now_ms: i64,
        partition: i32,
        coordinator_epoch: i32,
        records: impl IntoIterator<Item = TxnLogRecord>,
    ) {
        match self.led.get_mut(&partition) {
            Some(led) if led.coordinator_epoch == coordinator_epoch && !led.loaded => {
                led.loaded = true;
            }
            _ => return,
        }
        for record in records {
            if self.state_partition(&record.transactional_id) != partition {
                continue; // not this partition's key (the partition count changed): skip it
            }
            match record.value {
                Some(meta) => {
                    self.entries.insert(
                        record.transactional_id,
                        Entry {
                            meta,
                            partition,
                            pending: None,
                            complete_retry: false,
                        },
                    );
                }
                None => {
                    self.entries.remove(&record.transactional_id);
                }
            }
        }
        let preparing: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.partition == partition && entry.meta.state.is_prepare())
            .map(|(id, _)| id.clone())
            .collect();
        for id in preparing {
            self.start_markers(now_ms, &id);
        }
    }

    /// This broker no longer leads `partition`: its ids are forgotten; requests waiting for one
    /// of their records are answered NOT_COORDINATOR (the record may or may not be durable: the
    /// new coordinator's load decides).
    pub fn unload_partition(&mut self, partition: i32) {
        if self.led.remove(&partition).is_none() {
            return;
        }
        let ids: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.partition == partition)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let Some(entry) = self.entries.remove(&id) else {
                continue;
            };
            if let Some(pending) = entry.pending {
                self.persisting.remove(&pending.persist_id);
                let failed = crate::coordinator::PersistError::NotLeader;
                if let Some((meta, partitions, offsets)) = pending.after.request() {
                    let response = match pending.after {
                        After::ReplyInit(_) | After::ReplyFenced(_) => {
                            crate::init::init_error(failed.error_code())
                        }
                        After::ReplyEnd(_) => crate::end::end_error(failed.error_code()),
                        _ => crate::add::add_reply(
                            partitions.unwrap_or(&[]),
                            ErrorCode::NOT_COORDINATOR,
                            offsets,
                        ),
                    };
                    self.reply(meta, response);
                }
            }
        }
    }

    /// The partition count of `__transaction_state` as the cluster has it (the config's count
    /// only decides the topic's creation). A change unloads every partition: ids map to other
    /// partitions now.
    pub fn set_state_log_partitions(&mut self, partitions: i32) {
        if partitions <= 0 || partitions == self.config.state_log_partitions {
            return;
        }
        let led: Vec<i32> = self.led.keys().copied().collect();
        for partition in led {
            self.unload_partition(partition);
        }
        self.config.state_log_partitions = partitions;
    }

    /// The state partitions led here (with their coordinator epochs and whether loaded).
    pub fn led_partitions(&self) -> Vec<(i32, i32, bool)> {
        self.led
            .iter()
            .map(|(partition, led)| (*partition, led.coordinator_epoch, led.loaded))
            .collect()
    }

    /// When [`Coordinator::tick`] next has work (ms).
    pub fn next_deadline_ms(&self) -> i64 {
        self.next_abort_check_ms.min(self.next_expire_check_ms)
    }

    /// Periodic work, due at [`Coordinator::next_deadline_ms`] (calling it more often is
    /// harmless): aborts open transactions past their timeout (Kafka's
    /// `abortTimedOutTransactions`: the epoch is bumped so the producer is fenced), expires ids
    /// idle longer than `transactional.id.expiration.ms` (a tombstone, then the id is
    /// forgotten), and retries Complete records whose append failed.
    pub fn tick(&mut self, now_ms: i64) {
        if now_ms >= self.next_abort_check_ms {
            self.next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms;
            self.abort_timed_out(now_ms);
            let retry: Vec<String> = self
                .entries
                .iter()
                .filter(|(_, entry)| entry.complete_retry && entry.pending.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            for id in retry {
                self.complete(now_ms, &id);
            }
        }
        if now_ms >= self.next_expire_check_ms {
            self.next_expire_check_ms = now_ms + self.config.remove_expired_interval_ms;
            self.expire_ids(now_ms);
        }
    }

    fn loaded(&self, partition: i32) -> bool {
        self.led.get(&partition).is_some_and(|led| led.loaded)
    }

    fn abort_timed_out(&mut self, now_ms: i64) {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| {
                entry.pending.is_none()
                    && entry.meta.state == TxnState::Ongoing
                    && entry.meta.start_ms + i64::from(entry.meta.timeout_ms) < now_ms
                    && self.loaded(entry.partition)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let Some(current) = self.entries.get(&id).map(|entry| &entry.meta) else {
                continue;
            };
            let target = fence_abort(current, now_ms);
            self.begin_transition(&id, Some(target), After::Markers);
        }
    }

    fn expire_ids(&mut self, now_ms: i64) {
        let expiration_ms = self.config.id_expiration_ms;
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| {
                entry.pending.is_none()
                    && entry.meta.state.is_idle()
                    && entry.meta.last_update_ms.saturating_add(expiration_ms) <= now_ms
                    && self.loaded(entry.partition)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.begin_transition(&id, None, After::Removed);
        }
    }
}
