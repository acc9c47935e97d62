//! The read-only group APIs: DescribeGroups and ListGroups. (FindCoordinator is answered from the
//! cluster image by its handler: it needs no group state.)
//!
//! Must never: change a group.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::coordinator::{Coordinator, RequestMeta, Response};
use super::state::GroupState;

/// The group types ListGroups v5+ reports (Kafka's `Group.GroupType` names).
const GROUP_TYPE_CLASSIC: &str = "classic";
const GROUP_TYPE_CONSUMER: &str = "consumer";
/// A consumer group's protocol type (Kafka's `ConsumerProtocol.PROTOCOL_TYPE`).
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
/// DescribeGroups' state for a group the coordinator does not hold (Kafka answers it without an
/// error up to v5).
const STATE_DEAD: &str = "Dead";

fn str_bytes(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

impl Coordinator {
    /// DescribeGroups, every version: state, protocol and members; member metadata and assignments
    /// only for a Stable group (as Kafka), and "Dead" for a group that does not exist or is a
    /// consumer group.
    pub fn handle_describe_groups(&mut self, meta: RequestMeta, request: DescribeGroupsRequest) {
        let version = meta.version;
        let mut response = DescribeGroupsResponse::default();
        for group_id in &request.groups {
            let mut described = DescribedGroup::default();
            described.group_id = group_id.clone();
            if let Some(error) = self.unavailable_for(group_id.0.as_str()) {
                described.error_code = error.code();
                response.groups.push(described);
                continue;
            }
            // Kafka 4.1.1 looks a consumer group's id up as a classic group, which fails, and
            // answers "Dead" (with GROUP_ID_NOT_FOUND from v6, past Skiff's v5); the classic
            // entry holding a consumer group's offsets is not shown.
            let classic = self
                .groups
                .get(group_id.0.as_str())
                .filter(|_| self.consumer_groups.group(group_id.0.as_str()).is_none());
            let Some(group) = classic else {
                described.group_state = StrBytes::from_static_str(STATE_DEAD);
                response.groups.push(described);
                continue;
            };
            described.group_state = StrBytes::from_static_str(group.state.name());
            described.protocol_type = str_bytes(group.protocol_type.as_deref().unwrap_or(""));
            let stable = group.state == GroupState::Stable;
            let protocol = if stable {
                group.protocol_name.clone().unwrap_or_default()
            } else {
                String::new()
            };
            described.protocol_data = str_bytes(&protocol);
            for member in group.members.values() {
                let mut entry = DescribedGroupMember::default();
                entry.member_id = str_bytes(&member.member_id);
                if version >= 4 {
                    entry.group_instance_id = member.group_instance_id.as_deref().map(str_bytes);
                }
                entry.client_id = str_bytes(&member.client_id);
                entry.client_host = str_bytes(&member.client_host);
                if stable {
                    entry.member_metadata =
                        member.metadata_for(&protocol).cloned().unwrap_or_default();
                    entry.member_assignment = member.assignment.clone();
                }
                described.members.push(entry);
            }
            response.groups.push(described);
        }
        self.reply(meta.request_id, version, Response::DescribeGroups(response));
    }

    /// ListGroups, every version, with the v4 state filter and the v5 type filter (both
    /// case-insensitive, as Kafka).
    pub fn handle_list_groups(&mut self, meta: RequestMeta, request: ListGroupsRequest) {
        let version = meta.version;
        let mut response = ListGroupsResponse::default();
        if let Some(error_code) = self.not_ready() {
            response.error_code = error_code;
        } else {
            let states: Vec<String> = request
                .states_filter
                .iter()
                .map(|state| state.as_str().to_lowercase())
                .collect();
            let types: Vec<String> = request
                .types_filter
                .iter()
                .map(|kind| kind.as_str().to_lowercase())
                .collect();
            let type_wanted =
                version < 5 || types.is_empty() || types.iter().any(|t| t == GROUP_TYPE_CLASSIC);
            // A consumer group's committed offsets live in a classic entry of the same id: the
            // group is listed once, as the consumer group it is.
            let classic = self
                .groups
                .values()
                .filter(|group| self.consumer_groups.group(&group.group_id).is_none());
            for group in classic {
                let state_wanted = version < 4
                    || states.is_empty()
                    || states.contains(&group.state.name().to_lowercase());
                if !state_wanted || !type_wanted {
                    continue;
                }
                let mut listed = ListedGroup::default();
                listed.group_id = kafka_protocol::messages::GroupId(str_bytes(&group.group_id));
                listed.protocol_type = str_bytes(group.protocol_type.as_deref().unwrap_or(""));
                if version >= 4 {
                    listed.group_state = StrBytes::from_static_str(group.state.name());
                }
                if version >= 5 {
                    listed.group_type = StrBytes::from_static_str(GROUP_TYPE_CLASSIC);
                }
                response.groups.push(listed);
            }
            let consumer = self.listed_consumer_groups(version, &states, &types);
            response.groups.extend(consumer);
        }
        self.reply(meta.request_id, version, Response::ListGroups(response));
    }

    /// The consumer groups (KIP-848) of a ListGroups, as Kafka 4.1.1's `ModernGroup.asListedGroup`
    /// shows them: protocol type "consumer", the state's name, type "consumer"; the filters as
    /// for classic groups (lowercase already).
    fn listed_consumer_groups(
        &self,
        version: i16,
        states: &[String],
        types: &[String],
    ) -> Vec<ListedGroup> {
        let type_wanted =
            version < 5 || types.is_empty() || types.iter().any(|t| t == GROUP_TYPE_CONSUMER);
        if !type_wanted {
            return Vec::new();
        }
        self.consumer_groups
            .group_ids()
            .filter_map(|group_id| self.consumer_groups.group(group_id))
            .filter(|group| {
                version < 4
                    || states.is_empty()
                    || states.contains(&group.state().name().to_lowercase())
            })
            .map(|group| {
                let mut listed = ListedGroup::default();
                listed.group_id = kafka_protocol::messages::GroupId(str_bytes(group.group_id()));
                listed.protocol_type = StrBytes::from_static_str(CONSUMER_PROTOCOL_TYPE);
                if version >= 4 {
                    listed.group_state = StrBytes::from_static_str(group.state().name());
                }
                if version >= 5 {
                    listed.group_type = StrBytes::from_static_str(GROUP_TYPE_CONSUMER);
                }
                listed
            })
            .collect()
    }
}
