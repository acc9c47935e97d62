//! Partition reassignments on this broker's side: AlterPartitionReassignments written by the
//! broker that receives it (`skiff_cluster::reassign::plan_alter` through [`super::requests`]:
//! only the `R/reassign/<t>/<p>` records; the controller carries them out), the reassignments
//! ListPartitionReassignments lists, and the partitions this broker's fetcher throttles because
//! it is catching up for a reassignment.
//!
//! Must never: move a replica or a leadership itself (the controller's steps do), or write
//! without the session fence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use skiff_cluster::controller::PlanLimits;
use skiff_cluster::reassign::{self, AlterRefusal, AlterRequest, Listed};
use skiff_placement::NodeId;

use super::requests::Answer;
use super::Cluster;

impl Cluster {
    /// Writes the reassignment records of `requested` (a target, or `None` to cancel), within
    /// `wait`. Answers every entry, in the order asked (a partition listed twice gets the answer
    /// of its first entry).
    pub async fn alter_reassignments(
        &self,
        requested: Vec<AlterRequest>,
        wait: Duration,
    ) -> Vec<((String, i32), Answer<AlterRefusal>)> {
        let mut targets: BTreeMap<(String, i32), Option<Vec<NodeId>>> = BTreeMap::new();
        for (partition, replicas) in &requested {
            targets
                .entry(partition.clone())
                .or_insert_with(|| replicas.clone());
        }
        let partitions = requested.into_iter().map(|(partition, _)| partition);
        let now_ms = u64::try_from(crate::clock::now_ms()).unwrap_or(0);
        let what = ("AlterPartitionReassignments", "reassignment written");
        self.write_requested(what, partitions.collect(), wait, |image, pending, fence| {
            let pending: Vec<AlterRequest> = pending
                .iter()
                .map(|partition| {
                    let target = targets.get(partition).cloned().flatten();
                    (partition.clone(), target)
                })
                .collect();
            let plan = reassign::plan_alter(image, &pending, fence, now_ms, PlanLimits::default());
            (plan.writes, plan.refused)
        })
        .await
    }

    /// The reassignments in progress (of the topics and partitions `filter` names, when given).
    pub fn list_reassignments(&self, filter: Option<&[(String, Vec<i32>)]>) -> Vec<Listed> {
        self.with_image(|image| reassign::listed(image, filter))
            .unwrap_or_default()
    }

    /// The partitions this broker is catching up for a reassignment (in its target, not in the
    /// ISR yet): its fetcher throttles them.
    pub fn reassignment_catch_up(&self) -> BTreeSet<(String, i32)> {
        self.with_image(|image| reassign::catching_up(image, self.node_id))
            .unwrap_or_default()
    }
}
