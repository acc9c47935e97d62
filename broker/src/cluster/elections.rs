//! The ElectLeaders API's store side: the broker that received the request plans the elections
//! on its image (`skiff_cluster::election`, the same rules and fences as the controller's
//! elections) and writes them itself ([`super::requests`]: re-planned after a refused compare,
//! until the request's timeout). There is no call to the controller: the store's compares order
//! its writes against the controller's.
//!
//! Must never: decide an election itself (the pure plan does).

use std::time::Duration;

use skiff_cluster::controller::PlanLimits;
use skiff_cluster::election::{self, ElectionType, NoElection};

use super::requests::Answer;
use super::Cluster;

/// What became of one requested partition: elected (written), refused and why, or timed out.
pub type ElectionAnswer = Answer<NoElection>;

impl Cluster {
    /// Elects leaders of `requested` (every partition of every ready topic when `None`) by
    /// `election_type`, within `wait`. Answers every partition once, in the order asked (for
    /// `None`: topic and partition order), once this broker's image shows the elections.
    pub async fn elect_leaders(
        &self,
        requested: Option<Vec<(String, i32)>>,
        election_type: ElectionType,
        wait: Duration,
    ) -> Vec<((String, i32), ElectionAnswer)> {
        let requested = match requested {
            Some(requested) => requested,
            None => self
                .with_image(election::all_partitions)
                .unwrap_or_default(),
        };
        self.write_requested(
            ("ElectLeaders", "elected"),
            requested,
            wait,
            |image, pending, fence| {
                let plan =
                    election::plan(image, pending, election_type, fence, PlanLimits::default());
                (plan.writes, plan.refused)
            },
        )
        .await
    }
}
