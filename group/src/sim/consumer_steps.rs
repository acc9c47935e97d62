//! The consumer group simulation's steps (faults, heartbeats, restarts) and its checks.

use super::*;
use crate::consumer::partition_count;
use skiff_protocol::error_code;

impl Sim {
    /// One step: time passes, deadlines fire, revocations finish, maybe a fault, then every due
    /// client heartbeats.
    pub(super) fn step(&mut self, faults: bool) {
        self.write_faults = faults;
        self.now_ms += self.rng.gen_range(0..800);
        if self
            .coord
            .next_deadline_ms()
            .is_some_and(|deadline| deadline <= self.now_ms)
        {
            self.coord.tick(self.now_ms);
            let replies = self.settle();
            assert!(replies.is_empty(), "a tick answered {replies:?}");
        }
        for client in &mut self.clients {
            if let Liveness::Paused(until) = client.liveness {
                if until <= self.now_ms {
                    client.liveness = Liveness::Alive;
                }
            }
            if client.liveness == Liveness::Alive
                && client.revoking_until.is_some_and(|t| t <= self.now_ms)
            {
                let assigned = client.assigned.clone();
                client.owned.retain(|topic, partitions| {
                    partitions.retain(|p| crate::consumer::contains(&assigned, *topic, *p));
                    !partitions.is_empty()
                });
                client.revoking_until = None;
                client.owned_changed = true;
            }
        }
        if faults {
            self.fault();
            self.coord.set_topic_image(self.topics.clone());
        }
        let due: Vec<usize> = (0..self.clients.len())
            .filter(|&index| {
                let client = &self.clients[index];
                client.liveness == Liveness::Alive && client.next_heartbeat_ms <= self.now_ms
            })
            .collect();
        // Half the steps, the due clients heartbeat at once: all but the first wait behind
        // its write and then go out as one write.
        if self.rng.gen_bool(0.5) {
            let requests: Vec<HeartbeatRequest> = due
                .iter()
                .map(|&index| self.heartbeat_request(index))
                .collect();
            let answers = self.exchange_together(&requests);
            for ((index, request), answer) in due.into_iter().zip(&requests).zip(answers) {
                let lose = faults && self.rng.gen_bool(0.03);
                self.absorb(index, request, answer, lose);
            }
            return;
        }
        for index in due {
            let lose = faults && self.rng.gen_bool(0.03);
            let request = self.heartbeat_request(index);
            let answer = self.exchange(&request);
            self.absorb(index, &request, answer, lose);
        }
    }

    fn fault(&mut self) {
        let index = self.rng.gen_range(0..self.clients.len());
        match self.rng.gen_range(0..100) {
            0 => self.clients[index].liveness = Liveness::Crashed,
            1..=2 => {
                let until =
                    self.now_ms + self.rng.gen_range(1_000..2 * i64::from(SESSION_TIMEOUT_MS));
                if self.clients[index].liveness == Liveness::Alive {
                    self.clients[index].liveness = Liveness::Paused(until);
                }
            }
            3..=4 => self.leave(index),
            5..=7 => {
                let (names, pattern) = self.random_subscription();
                let client = &mut self.clients[index];
                (client.names, client.pattern, client.subscription_changed) =
                    (names, pattern, true);
            }
            8 => {
                let names: Vec<String> = self.topics.by_name.keys().cloned().collect();
                let name = &names[self.rng.gen_range(0..names.len())];
                let grow = self.rng.gen_range(1..3);
                if let Some((_, partitions)) = self.topics.by_name.get_mut(name) {
                    *partitions = (*partitions + grow).min(12);
                }
                self.topics.version += 1;
            }
            9 if !self.topics.by_name.contains_key("td") => {
                self.topics
                    .by_name
                    .insert("td".to_owned(), (topic_id(3), 2));
                self.topics.version += 1;
            }
            10 => self.restart(),
            11..=13 if self.clients[index].liveness == Liveness::Crashed => {
                self.clients[index] = self.new_client();
            }
            _ => {}
        }
    }

    /// A client leaves: it gives up its partitions first (as the Java client does), then sends
    /// -1, or -2 when static (its successor process will have a new member id).
    fn leave(&mut self, index: usize) {
        let client = &self.clients[index];
        if client.liveness != Liveness::Alive || !client.joined {
            return;
        }
        let static_leave = client.instance_id.is_some() && self.rng.gen_bool(0.7);
        let mut request = request(client, false);
        request.member_epoch = if static_leave {
            epochs::LEAVE_STATIC
        } else {
            epochs::LEAVE
        };
        self.clients[index].owned.clear();
        match self.exchange(&request) {
            Ok(response) => assert_eq!(response.member_epoch, request.member_epoch),
            // A failed write leaves the member in; its session ends it.
            Err((code, message)) => assert!(
                [
                    error_code::UNKNOWN_MEMBER_ID,
                    error_code::FENCED_INSTANCE_ID,
                    error_code::COORDINATOR_NOT_AVAILABLE,
                    error_code::NOT_COORDINATOR,
                ]
                .contains(&code),
                "leave refused: {code} {message:?}"
            ),
        }
        let pause = self.rng.gen_range(0..3_000);
        let mut client = self.new_client();
        client
            .instance_id
            .clone_from(&self.clients[index].instance_id);
        client.next_heartbeat_ms = self.now_ms + pause;
        self.clients[index] = client;
    }

    fn heartbeat_request(&mut self, index: usize) -> HeartbeatRequest {
        let full = self.rng.gen_bool(0.3) || self.clients[index].owned_changed;
        request(&self.clients[index], full)
    }

    /// What a client does with its heartbeat's answer.
    fn absorb(
        &mut self,
        index: usize,
        request: &HeartbeatRequest,
        result: io::Answer,
        lose_response: bool,
    ) {
        let delay = if self.clients[index].slow {
            self.rng.gen_range(0..8_000)
        } else {
            self.rng.gen_range(0..1_500)
        };
        let client = &mut self.clients[index];
        client.next_heartbeat_ms = self.now_ms + i64::from(HEARTBEAT_INTERVAL_MS);
        let response = match result {
            Ok(response) => response,
            Err((code, message)) => return on_error(client, code, &format!("{code} {message:?}")),
        };
        if lose_response {
            return;
        }
        client.epoch = response.member_epoch;
        client.joined = true;
        client.subscription_changed &= request.subscribed_topic_names.is_none();
        if request.topic_partitions.is_some() {
            client.owned_changed = false;
        }
        if let Some(assignment) = response.assignment {
            client.assigned = assignment;
            for (topic, partitions) in &client.assigned {
                client
                    .owned
                    .entry(*topic)
                    .or_default()
                    .extend(partitions.iter().copied());
            }
            let revoking = all(&client.owned)
                .difference(&all(&client.assigned))
                .count()
                > 0;
            if revoking && client.revoking_until.is_none() {
                client.revoking_until = Some(self.now_ms + delay);
            }
        }
    }

    fn restart(&mut self) {
        let replayed = replay_log(&self.log);
        assert_eq!(
            snapshot(self.coord.consumer_groups()),
            snapshot(&replayed),
            "replay of the durable records differs from the live group"
        );
        self.coord = io::coordinator(&self.log);
        self.coord.set_topic_image(self.topics.clone());
        self.restarts += 1;
    }

    /// Faults stop, paused clients resume, crashed ones are replaced; within 30 s of
    /// heartbeats the group must be Stable.
    pub(super) fn quiesce(&mut self) {
        for index in 0..self.clients.len() {
            match self.clients[index].liveness {
                Liveness::Crashed => self.clients[index] = self.new_client(),
                _ => self.clients[index].liveness = Liveness::Alive,
            }
            self.clients[index].slow = false;
        }
        let end = self.now_ms + 30_000;
        while self.now_ms < end {
            self.step(false);
            self.check();
        }
        assert!(
            stable(self.coord.consumer_groups()),
            "not stable after quiescing: {:?}",
            self.coord.consumer_groups().describe(GROUP)
        );
    }

    /// The invariants of the module doc.
    ///
    /// Skipped when nothing they read changed since the last check: no record written, no
    /// restart, no partition taken or given up by a client, the same topic table.
    pub(super) fn check(&mut self) {
        let held: usize = self.clients.iter().map(|c| partition_count(&c.owned)).sum();
        let fingerprint = (self.log.len(), self.restarts, held, self.topics.version);
        if self.last_checked == Some(fingerprint) {
            return;
        }
        self.last_checked = Some(fingerprint);
        let Some(group) = self.coord.consumer_groups().group(GROUP) else {
            return;
        };
        assert!(
            group.group_epoch() >= self.group_epoch_max,
            "group epoch went back"
        );
        self.group_epoch_max = group.group_epoch();
        assert!(
            group.assignment_epoch() >= self.assignment_epoch_max,
            "target epoch went back"
        );
        self.assignment_epoch_max = group.assignment_epoch();
        assert!(group.assignment_epoch() <= group.group_epoch());
        let mut owner: BTreeMap<(TopicId, i32), &str> = BTreeMap::new();
        for member in group.members().values() {
            let held = all(&member.assignment.assigned)
                .union(&all(&member.assignment.pending_revocation))
                .copied()
                .collect::<Vec<_>>();
            for partition in held {
                if let Some(other) = owner.insert(partition, &member.member_id) {
                    panic!("{partition:?} owned by {other} and {}", member.member_id);
                }
            }
        }
        let subscribed = self.subscribed(group);
        let fresh = group.metadata_hash() == group.metadata_hash_for(&self.topics);
        self.check_member_epochs();
        self.check_clients();
        self.check_target(&subscribed, fresh);
        self.check_stable(&subscribed, fresh);
    }

    fn check_member_epochs(&mut self) {
        let Some(group) = self.coord.consumer_groups().group(GROUP) else {
            return;
        };
        self.member_epochs
            .retain(|id, _| group.members().contains_key(id));
        for member in group.members().values() {
            let epoch = member.assignment.member_epoch;
            if epoch == epochs::LEAVE_STATIC {
                self.member_epochs.remove(&member.member_id);
                continue;
            }
            let last = self.member_epochs.insert(member.member_id.clone(), epoch);
            assert!(
                last.is_none_or(|last| last <= epoch),
                "member {} epoch went back",
                member.member_id
            );
        }
    }

    fn check_clients(&self) {
        let Some(group) = self.coord.consumer_groups().group(GROUP) else {
            return;
        };
        for client in &self.clients {
            let member = group.members().get(&client.member_id);
            let (Some(member), false) = (member, client.liveness == Liveness::Crashed) else {
                continue;
            };
            let server: BTreeSet<_> = all(&member.assignment.assigned)
                .union(&all(&member.assignment.pending_revocation))
                .copied()
                .collect();
            let held = all(&client.owned);
            assert!(
                held.is_subset(&server),
                "client {} holds {held:?} beyond the coordinator's {server:?}",
                client.member_id
            );
        }
    }

    /// The partitions the coordinator's subscriptions name, by the topic table it last saw.
    fn subscribed(&self, group: &crate::consumer::ConsumerGroup) -> Subscribed {
        let mut subscribed: BTreeMap<TopicId, (i32, BTreeSet<String>)> = BTreeMap::new();
        for member in group.members().values() {
            for name in group.member_topics(member) {
                if let Some((id, partitions)) = self.topics.by_name.get(&name) {
                    subscribed
                        .entry(*id)
                        .or_insert((*partitions, BTreeSet::new()))
                        .1
                        .insert(member.member_id.clone());
                }
            }
        }
        subscribed
    }

    fn check_target(&self, subscribed: &Subscribed, fresh: bool) {
        let Some(group) = self.coord.consumer_groups().group(GROUP) else {
            return;
        };
        let up_to_date = fresh && group.group_epoch() == group.assignment_epoch();
        let mut seen = BTreeSet::new();
        for member in group.members().values() {
            for partition in all(group
                .target(&member.member_id)
                .unwrap_or(&Assignment::new()))
            {
                assert!(seen.insert(partition), "{partition:?} twice in the target");
                if up_to_date {
                    let subscribers = subscribed.get(&partition.0).map(|(_, s)| s);
                    assert!(
                        subscribers.is_some_and(|s| s.contains(&member.member_id)),
                        "{partition:?} targets a non-subscriber"
                    );
                }
            }
        }
    }

    fn check_stable(&mut self, subscribed: &Subscribed, fresh: bool) {
        let Some(group) = self.coord.consumer_groups().group(GROUP) else {
            return;
        };
        let fresh = fresh
            && group
                .resolved_regexes()
                .values()
                .all(|value| value.version == self.topics.version);
        if group.state() != ConsumerGroupState::Stable || !fresh {
            return;
        }
        let expected: BTreeSet<(TopicId, i32)> = subscribed
            .iter()
            .flat_map(|(topic, (partitions, _))| (0..*partitions).map(|p| (*topic, p)))
            .collect();
        let owned: BTreeSet<(TopicId, i32)> = group
            .members()
            .values()
            .flat_map(|m| all(&m.assignment.assigned))
            .collect();
        assert_eq!(
            owned, expected,
            "a Stable group owns every subscribed partition once"
        );
        self.stable_checks += 1;
    }
}

/// Per subscribed topic: its partition count and its subscribers.
type Subscribed = BTreeMap<TopicId, (i32, BTreeSet<String>)>;

/// A refused heartbeat: as the Java client reacts.
fn on_error(client: &mut Client, code: i16, message: &str) {
    match code {
        error_code::FENCED_MEMBER_EPOCH | error_code::UNKNOWN_MEMBER_ID => {
            // The member lost its partitions: it drops them and rejoins with epoch 0.
            client.owned.clear();
            client.assigned.clear();
            client.revoking_until = None;
            client.epoch = epochs::JOIN;
            client.joined = false;
            client.subscription_changed = true;
        }
        // A write that failed (the coordinator rolled the group back): retried as it stands,
        // as the Java client retries these (after finding the coordinator for NOT_COORDINATOR).
        error_code::UNRELEASED_INSTANCE_ID
        | error_code::COORDINATOR_NOT_AVAILABLE
        | error_code::NOT_COORDINATOR => {}
        error_code::FENCED_INSTANCE_ID => {
            // Another process took this instance id: this one stops for good.
            client.owned.clear();
            client.liveness = Liveness::Crashed;
        }
        _ => panic!("unexpected heartbeat error {message}"),
    }
}
