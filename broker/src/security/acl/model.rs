//! Kafka's ACL vocabulary: who (a principal or every user), what (a resource type and a literal,
//! wildcard or prefixed name pattern), which operation, and allow or deny. Each term has one
//! spelling in the ACL file, parsed and printed here.
//!
//! Must never: decide anything (the authorizer does) or read a file.

use std::fmt;

/// The kinds of resources an ACL can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// A topic.
    Topic,
    /// A consumer group.
    Group,
    /// The cluster itself (Kafka names its one cluster resource `kafka-cluster`).
    Cluster,
    /// A transactional producer id.
    TransactionalId,
    /// A delegation token (stored and listed; Skiff issues no tokens, so nothing checks it).
    DelegationToken,
    /// A user, for CreateTokens on another user's behalf (stored and listed, never checked).
    User,
}

impl ResourceType {
    /// Every resource type, in file order.
    pub const ALL: [Self; 6] = [
        Self::Topic,
        Self::Group,
        Self::Cluster,
        Self::TransactionalId,
        Self::DelegationToken,
        Self::User,
    ];

    /// The spelling in the ACL file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Topic => "topic",
            Self::Group => "group",
            Self::Cluster => "cluster",
            Self::TransactionalId => "transactional-id",
            Self::DelegationToken => "delegation-token",
            Self::User => "user",
        }
    }

    /// Kafka's wire code (`ResourceType` in the ACL APIs).
    pub fn code(self) -> i8 {
        match self {
            Self::Topic => 2,
            Self::Group => 3,
            Self::Cluster => 4,
            Self::TransactionalId => 5,
            Self::DelegationToken => 6,
            Self::User => 7,
        }
    }

    /// The resource type of a wire code; `None` for UNKNOWN (0), ANY (1) and codes Kafka lacks.
    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The operations Kafka's `AclEntry.supportedOperations` lists for this type: what an
    /// authorized-operations bit field (DescribeCluster, Metadata) may contain.
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            Self::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            Self::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            Self::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            Self::TransactionalId => &[Describe, Write, TwoPhaseCommit],
            Self::DelegationToken => &[Describe],
            Self::User => &[CreateTokens, DescribeTokens],
        }
    }

    /// Parses the file spelling (case-insensitive; `_` may stand for `-`).
    pub fn parse(text: &str) -> Option<Self> {
        let wanted = normalise(text);
        Self::ALL
            .into_iter()
            .find(|kind| normalise(kind.name()) == wanted)
    }
}

/// Kafka's name for the single cluster resource; the only name a cluster ACL may carry.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The name that, as a literal pattern, matches every resource of its type.
pub const WILDCARD_NAME: &str = "*";

/// How a pattern's name is compared with a resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    /// Equal names, or every name when the pattern's name is `*`.
    Literal,
    /// Resource names that start with the pattern's name.
    Prefixed,
}

impl PatternType {
    /// Kafka's wire code (LITERAL 3, PREFIXED 4).
    pub fn code(self) -> i8 {
        match self {
            Self::Literal => 3,
            Self::Prefixed => 4,
        }
    }

    /// The pattern type of a wire code; `None` for UNKNOWN, ANY, MATCH and codes Kafka lacks.
    pub fn from_code(code: i8) -> Option<Self> {
        [Self::Literal, Self::Prefixed]
            .into_iter()
            .find(|kind| kind.code() == code)
    }
}

/// What an ACL applies to: a resource type and a name pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// The resource type.
    pub resource_type: ResourceType,
    /// How `name` is matched.
    pub pattern_type: PatternType,
    /// The literal name, `*`, or the prefix.
    pub name: String,
}

impl ResourcePattern {
    /// Whether this pattern covers the resource `resource_type`/`name`.
    pub fn matches(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == WILDCARD_NAME || self.name == name,
                PatternType::Prefixed => name.starts_with(self.name.as_str()),
            }
    }
}

/// Operations, as Kafka names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Every operation.
    All,
    /// Consume from a topic; join and commit in a group.
    Read,
    /// Produce to a topic; use a transactional id.
    Write,
    /// Create topics.
    Create,
    /// Delete topics.
    Delete,
    /// Change a resource (partitions).
    Alter,
    /// See that a resource exists and read its metadata.
    Describe,
    /// Broker-to-broker requests (follower fetches).
    ClusterAction,
    /// Read configuration.
    DescribeConfigs,
    /// Change configuration.
    AlterConfigs,
    /// Produce idempotently.
    IdempotentWrite,
    /// Create delegation tokens (stored and listed; Skiff issues no tokens).
    CreateTokens,
    /// Describe delegation tokens (stored and listed; Skiff issues no tokens).
    DescribeTokens,
    /// Two-phase commit of transactions (KIP-939; stored and listed, never checked).
    TwoPhaseCommit,
}

impl Operation {
    /// Every operation, in file order.
    pub const ALL: [Self; 14] = [
        Self::All,
        Self::Read,
        Self::Write,
        Self::Create,
        Self::Delete,
        Self::Alter,
        Self::Describe,
        Self::ClusterAction,
        Self::DescribeConfigs,
        Self::AlterConfigs,
        Self::IdempotentWrite,
        Self::CreateTokens,
        Self::DescribeTokens,
        Self::TwoPhaseCommit,
    ];

    /// The spelling in the ACL file.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Read => "read",
            Self::Write => "write",
            Self::Create => "create",
            Self::Delete => "delete",
            Self::Alter => "alter",
            Self::Describe => "describe",
            Self::ClusterAction => "cluster-action",
            Self::DescribeConfigs => "describe-configs",
            Self::AlterConfigs => "alter-configs",
            Self::IdempotentWrite => "idempotent-write",
            Self::CreateTokens => "create-tokens",
            Self::DescribeTokens => "describe-tokens",
            Self::TwoPhaseCommit => "two-phase-commit",
        }
    }

    /// Kafka's wire code (`AclOperation`: ALL 2 … TWO_PHASE_COMMIT 15).
    pub fn code(self) -> i8 {
        match self {
            Self::All => 2,
            Self::Read => 3,
            Self::Write => 4,
            Self::Create => 5,
            Self::Delete => 6,
            Self::Alter => 7,
            Self::Describe => 8,
            Self::ClusterAction => 9,
            Self::DescribeConfigs => 10,
            Self::AlterConfigs => 11,
            Self::IdempotentWrite => 12,
            Self::CreateTokens => 13,
            Self::DescribeTokens => 14,
            Self::TwoPhaseCommit => 15,
        }
    }

    /// The operation of a wire code; `None` for UNKNOWN (0), ANY (1) and codes Kafka lacks.
    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|operation| operation.code() == code)
    }

    /// Parses the file spelling, case-insensitive, with `-`, `_` or nothing between words
    /// (`cluster-action`, `ClusterAction`, `CLUSTER_ACTION`).
    pub fn parse(text: &str) -> Option<Self> {
        let wanted = normalise(text);
        Self::ALL
            .into_iter()
            .find(|operation| normalise(operation.name()) == wanted)
    }

    /// Whether an allow ACL for `self` grants `wanted`: the same operation, `All`, or one of
    /// Kafka's implications (Read, Write, Delete and Alter imply Describe; AlterConfigs implies
    /// DescribeConfigs). Deny ACLs never use implication: denying Read does not deny Describe.
    pub fn allow_grants(self, wanted: Self) -> bool {
        self == wanted
            || self == Self::All
            || match wanted {
                Self::Describe => {
                    matches!(self, Self::Read | Self::Write | Self::Delete | Self::Alter)
                }
                Self::DescribeConfigs => self == Self::AlterConfigs,
                _ => false,
            }
    }

    /// Whether a deny ACL for `self` refuses `wanted`: the same operation or `All`.
    pub fn deny_refuses(self, wanted: Self) -> bool {
        self == wanted || self == Self::All
    }
}

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// Grants the operation, unless a matching deny exists.
    Allow,
    /// Refuses the operation, whatever allows exist.
    Deny,
}

impl Permission {
    /// The spelling in the ACL file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// Kafka's wire code (`AclPermissionType`: DENY 2, ALLOW 3).
    pub fn code(self) -> i8 {
        match self {
            Self::Deny => 2,
            Self::Allow => 3,
        }
    }

    /// The permission of a wire code; `None` for UNKNOWN (0), ANY (1) and codes Kafka lacks.
    pub fn from_code(code: i8) -> Option<Self> {
        [Self::Deny, Self::Allow]
            .into_iter()
            .find(|permission| permission.code() == code)
    }
}

/// Why a text is not an ACL principal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// No `type:name` form.
    #[error("principal '{0}' is not of the form User:<name> or User:*")]
    NotUserForm(String),
    /// A principal type other than `User`.
    #[error("principal type '{0}' is not supported (only User:<name> and User:*)")]
    UnsupportedType(String),
    /// `User:` with nothing after it.
    #[error("principal '{0}' has an empty name")]
    EmptyName(String),
}

/// The principal an ACL names: one user, or every user (`User:*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclPrincipal {
    /// `User:<name>`.
    User(String),
    /// `User:*`.
    AnyUser,
}

impl AclPrincipal {
    /// Parses `User:name` or `User:*` (the `User` type is case-sensitive, as in Kafka).
    pub fn parse(text: &str) -> Result<Self, PrincipalError> {
        let Some((kind, name)) = text.split_once(':') else {
            return Err(PrincipalError::NotUserForm(text.to_owned()));
        };
        if kind != "User" {
            return Err(PrincipalError::UnsupportedType(kind.to_owned()));
        }
        if name.is_empty() {
            return Err(PrincipalError::EmptyName(text.to_owned()));
        }
        Ok(if name == WILDCARD_NAME {
            Self::AnyUser
        } else {
            Self::User(name.to_owned())
        })
    }
}

impl fmt::Display for AclPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User(name) => write!(f, "User:{name}"),
            Self::AnyUser => f.write_str("User:*"),
        }
    }
}

/// One ACL: `permission` for `principal` to perform `operation` on resources matching `pattern`,
/// from `host` (`*` for every host, else one client address as Kafka writes it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acl {
    /// Allow or deny.
    pub permission: Permission,
    /// Who.
    pub principal: AclPrincipal,
    /// Which operation.
    pub operation: Operation,
    /// On what.
    pub pattern: ResourcePattern,
    /// From which client address: [`ANY_HOST`] or an IP address.
    pub host: String,
}

impl Acl {
    /// An ACL from every host (`*`), as the file writes them.
    pub fn from_any_host(
        permission: Permission,
        principal: AclPrincipal,
        operation: Operation,
        pattern: ResourcePattern,
    ) -> Self {
        Self {
            permission,
            principal,
            operation,
            pattern,
            host: ANY_HOST.to_owned(),
        }
    }
}

/// The host of an ACL that applies to every client address.
pub const ANY_HOST: &str = "*";

/// Whether an ACL for `acl_host` applies to a client at `peer`: `*` always; an address when it is
/// the client's (compared as addresses, so `::1` and Java's `0:0:0:0:0:0:0:1` agree); nothing else
/// when the client's address is unknown.
pub fn host_matches(acl_host: &str, peer: Option<std::net::IpAddr>) -> bool {
    if acl_host == ANY_HOST {
        return true;
    }
    let Some(peer) = peer else {
        return false;
    };
    match acl_host.parse::<std::net::IpAddr>() {
        Ok(address) => address == peer,
        Err(_) => acl_host == peer.to_string(),
    }
}

/// Lower case without `-` and `_`, so `ClusterAction`, `cluster-action` and `CLUSTER_ACTION` are
/// one spelling.
fn normalise(text: &str) -> String {
    text.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_spellings_round_trip_and_accept_kafka_names() {
        for operation in Operation::ALL {
            assert_eq!(Operation::parse(operation.name()), Some(operation));
        }
        assert_eq!(
            Operation::parse("ClusterAction"),
            Some(Operation::ClusterAction)
        );
        assert_eq!(
            Operation::parse("IDEMPOTENT_WRITE"),
            Some(Operation::IdempotentWrite)
        );
        assert_eq!(Operation::parse("reed"), None);
        for kind in ResourceType::ALL {
            assert_eq!(ResourceType::parse(kind.name()), Some(kind));
        }
        assert_eq!(
            ResourceType::parse("TransactionalId"),
            Some(ResourceType::TransactionalId)
        );
    }

    #[test]
    fn implication_applies_to_allows_only() {
        for granting in [
            Operation::Read,
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
        ] {
            assert!(granting.allow_grants(Operation::Describe));
            assert!(!granting.deny_refuses(Operation::Describe));
        }
        assert!(Operation::AlterConfigs.allow_grants(Operation::DescribeConfigs));
        assert!(!Operation::Create.allow_grants(Operation::Describe));
        assert!(!Operation::Describe.allow_grants(Operation::Read));
        assert!(!Operation::DescribeConfigs.allow_grants(Operation::AlterConfigs));
        for wanted in Operation::ALL {
            assert!(Operation::All.allow_grants(wanted));
            assert!(Operation::All.deny_refuses(wanted));
        }
    }

    #[test]
    fn principals_parse_as_kafka_spells_them() {
        assert_eq!(
            AclPrincipal::parse("User:alice"),
            Ok(AclPrincipal::User("alice".into()))
        );
        assert_eq!(AclPrincipal::parse("User:*"), Ok(AclPrincipal::AnyUser));
        assert!(AclPrincipal::parse("Group:ops").is_err());
        assert!(AclPrincipal::parse("user:alice").is_err());
        assert!(AclPrincipal::parse("alice").is_err());
        assert!(AclPrincipal::parse("User:").is_err());
    }
}
