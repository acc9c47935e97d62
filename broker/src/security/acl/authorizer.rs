//! The decision: may this principal perform this operation on this resource? Kafka's rules, over
//! an index built once per ACL set so a check (which runs per topic or group of every request)
//! costs a few map lookups rather than a scan of every ACL.
//!
//! Rules, as Kafka's authorizer applies them: super users may do everything; otherwise the ACLs
//! whose pattern matches the resource are gathered (the literal name, the literal `*`, and every
//! prefix of the name); if there are none at all, the answer is `allow.everyone.if.no.acl.found`;
//! a matching deny (same operation or `All`) wins over any allow; an allow of the operation,
//! of `All`, or of an operation that implies it (see [`Operation::allow_grants`]) grants it; and
//! nothing else does.
//!
//! Must never: read a file, the clock or the network (the reload task builds new sets; this only
//! answers questions about one).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use super::model::{
    host_matches, Acl, AclPrincipal, Operation, PatternType, Permission, ResourceType,
    WILDCARD_NAME,
};
use crate::security::session::Principal;

/// The rule of one ACL, as the index keeps it (its pattern and principal are the keys it is
/// stored under).
#[derive(Debug, Clone)]
struct Rule {
    permission: Permission,
    operation: Operation,
    /// `*` or one client address ([`host_matches`]).
    host: String,
}

/// Who asks: the principal and, when known, the client's address (host ACLs need it).
#[derive(Debug, Clone, Copy)]
struct Asker<'a> {
    principal: &'a Principal,
    peer: Option<IpAddr>,
}

/// The ACLs of one pattern, by principal: a check looks up its own principal instead of scanning
/// every principal's ACLs on a popular pattern.
#[derive(Debug, Default)]
struct PatternAcls {
    /// `User:*` ACLs.
    any_user: Vec<Rule>,
    /// `User:<name>` ACLs by name.
    by_user: HashMap<String, Vec<Rule>>,
}

impl PatternAcls {
    fn push(&mut self, principal: &AclPrincipal, rule: Rule) {
        match principal {
            AclPrincipal::AnyUser => self.any_user.push(rule),
            AclPrincipal::User(name) => self.by_user.entry(name.clone()).or_default().push(rule),
        }
    }

    /// The rules that apply to `principal`.
    fn rules_for<'a>(&'a self, asker: Asker<'_>) -> impl Iterator<Item = &'a Rule> + 'a {
        let own = self
            .by_user
            .get(&asker.principal.user)
            .into_iter()
            .flatten();
        let peer = asker.peer;
        self.any_user
            .iter()
            .chain(own)
            .filter(move |rule| host_matches(&rule.host, peer))
    }

    fn denies(&self, asker: Asker<'_>, operation: Operation) -> bool {
        self.rules_for(asker).any(|rule| {
            rule.permission == Permission::Deny && rule.operation.deny_refuses(operation)
        })
    }

    fn allows(&self, asker: Asker<'_>, operation: Operation) -> bool {
        self.rules_for(asker).any(|rule| {
            rule.permission == Permission::Allow && rule.operation.allow_grants(operation)
        })
    }
}

/// The ACLs of one resource type.
#[derive(Debug, Default)]
struct TypeIndex {
    /// Literal patterns by name (the wildcard `*` included, under its own name).
    literal: HashMap<String, PatternAcls>,
    /// Prefixed patterns by prefix.
    prefixed: HashMap<String, PatternAcls>,
    /// The distinct prefix lengths in bytes, sorted: a check looks up only the name's prefixes of
    /// these lengths, so its cost grows with how many lengths exist, not with the name's length
    /// or the number of prefixes.
    prefix_lengths_bytes: BTreeSet<usize>,
}

impl TypeIndex {
    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.prefixed.is_empty()
    }

    /// Every pattern that matches `name`.
    fn matching<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a PatternAcls> + 'a {
        let exact = self.literal.get(name);
        let wildcard = (name != WILDCARD_NAME)
            .then(|| self.literal.get(WILDCARD_NAME))
            .flatten();
        let prefixed = self
            .prefix_lengths_bytes
            .iter()
            .take_while(move |length| **length <= name.len())
            .filter_map(move |length| name.get(..*length))
            .filter_map(|prefix| self.prefixed.get(prefix));
        exact.into_iter().chain(wildcard).chain(prefixed)
    }
}

/// An immutable ACL set with its super users and default, ready to answer checks.
#[derive(Debug)]
pub struct Authorizer {
    /// One index per [`ResourceType`], in [`ResourceType::ALL`] order.
    by_type: [TypeIndex; 6],
    super_users: HashSet<String>,
    allow_everyone_if_no_acl_found: bool,
    acl_count: usize,
}

/// The index of `resource_type`'s ACLs: one per resource type, in `ResourceType`'s order.
fn type_index(by_type: &[TypeIndex; 6], resource_type: ResourceType) -> &TypeIndex {
    let [topic, group, cluster, transactional_id, token, user] = by_type;
    match resource_type {
        ResourceType::Topic => topic,
        ResourceType::Group => group,
        ResourceType::Cluster => cluster,
        ResourceType::TransactionalId => transactional_id,
        ResourceType::DelegationToken => token,
        ResourceType::User => user,
    }
}

/// [`type_index`], to fill.
fn type_index_mut(by_type: &mut [TypeIndex; 6], resource_type: ResourceType) -> &mut TypeIndex {
    let [topic, group, cluster, transactional_id, token, user] = by_type;
    match resource_type {
        ResourceType::Topic => topic,
        ResourceType::Group => group,
        ResourceType::Cluster => cluster,
        ResourceType::TransactionalId => transactional_id,
        ResourceType::DelegationToken => token,
        ResourceType::User => user,
    }
}

impl Authorizer {
    /// Indexes `acls`. `super_users` are user names (the part after `User:`).
    pub fn new(
        acls: &[Acl],
        super_users: impl IntoIterator<Item = String>,
        allow_everyone_if_no_acl_found: bool,
    ) -> Self {
        let mut by_type: [TypeIndex; 6] = Default::default();
        for acl in acls {
            let index = type_index_mut(&mut by_type, acl.pattern.resource_type);
            let rule = Rule {
                permission: acl.permission,
                operation: acl.operation,
                host: acl.host.clone(),
            };
            let name = acl.pattern.name.clone();
            let patterns = match acl.pattern.pattern_type {
                PatternType::Literal => &mut index.literal,
                PatternType::Prefixed => {
                    index.prefix_lengths_bytes.insert(name.len());
                    &mut index.prefixed
                }
            };
            patterns.entry(name).or_default().push(&acl.principal, rule);
        }
        Self {
            by_type,
            super_users: super_users.into_iter().collect(),
            allow_everyone_if_no_acl_found,
            acl_count: acls.len(),
        }
    }

    /// How many ACLs the set holds.
    pub fn acl_count(&self) -> usize {
        self.acl_count
    }

    /// Whether `principal`, at an unknown address (only `*`-host ACLs apply), may perform
    /// `operation` on the resource `resource_type`/`name`.
    pub fn authorize(
        &self,
        principal: &Principal,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorize_from(principal, None, operation, resource_type, name)
    }

    /// Whether `principal`, connected from `peer`, may perform `operation` on the resource
    /// `resource_type`/`name`.
    pub fn authorize_from(
        &self,
        principal: &Principal,
        peer: Option<IpAddr>,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let asker = Asker { principal, peer };
        if self.super_users.contains(&principal.user) {
            return true;
        }
        let mut found_any = false;
        let mut allowed = false;
        for patterns in type_index(&self.by_type, resource_type).matching(name) {
            found_any = true;
            for rule in patterns.rules_for(asker) {
                match rule.permission {
                    Permission::Deny if rule.operation.deny_refuses(operation) => return false,
                    Permission::Allow if rule.operation.allow_grants(operation) => allowed = true,
                    _ => {}
                }
            }
        }
        if found_any {
            allowed
        } else {
            self.allow_everyone_if_no_acl_found
        }
    }

    /// Whether `principal` may perform `operation` on at least one resource of `resource_type`
    /// (Kafka's authorize-by-resource-type, KIP-679: it lets an idempotent producer with Write on
    /// some topic go without IdempotentWrite on the cluster). True for super users, and when a
    /// resource no ACL names would be allowed; false when a wildcard deny applies; otherwise true
    /// when some allow pattern is not covered by a deny of the same principal (a literal deny of
    /// the same name, or a prefixed deny whose prefix starts the allowed name).
    pub fn authorize_any(
        &self,
        principal: &Principal,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        self.authorize_any_from(principal, None, operation, resource_type)
    }

    /// [`Authorizer::authorize_any`] for a client connected from `peer`.
    pub fn authorize_any_from(
        &self,
        principal: &Principal,
        peer: Option<IpAddr>,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let asker = Asker { principal, peer };
        if self.super_users.contains(&principal.user) {
            return true;
        }
        let index = type_index(&self.by_type, resource_type);
        if index.is_empty() {
            return self.allow_everyone_if_no_acl_found;
        }
        let denies = |patterns: &PatternAcls| patterns.denies(asker, operation);
        let allows = |patterns: &PatternAcls| patterns.allows(asker, operation);
        if index.literal.get(WILDCARD_NAME).is_some_and(denies) {
            return false;
        }
        let denied_by_prefix = |name: &str| {
            index
                .prefixed
                .iter()
                .any(|(prefix, patterns)| name.starts_with(prefix.as_str()) && denies(patterns))
        };
        let literal_allowed = index.literal.iter().any(|(name, patterns)| {
            allows(patterns) && !denies(patterns) && !denied_by_prefix(name)
        });
        literal_allowed
            || index
                .prefixed
                .iter()
                .any(|(prefix, patterns)| allows(patterns) && !denied_by_prefix(prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::model::{ResourcePattern, CLUSTER_NAME};
    use proptest::prelude::*;

    fn acl(
        permission: Permission,
        user: &str,
        operation: Operation,
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: &str,
    ) -> Acl {
        Acl {
            permission,
            principal: if user == "*" {
                AclPrincipal::AnyUser
            } else {
                AclPrincipal::User(user.to_owned())
            },
            operation,
            pattern: ResourcePattern {
                resource_type,
                pattern_type,
                name: name.to_owned(),
            },
            host: crate::security::acl::model::ANY_HOST.to_owned(),
        }
    }

    #[test]
    fn host_acls_apply_to_their_address_only() {
        let mut from_one = acl(Allow, "alice", Read, Topic, Literal, "orders");
        from_one.host = "10.0.0.1".to_owned();
        let mut deny_loopback = acl(Deny, "*", Read, Topic, Literal, "orders");
        deny_loopback.host = "0:0:0:0:0:0:0:1".to_owned();
        let authorizer = Authorizer::new(&[from_one, deny_loopback], [], false);
        let at = |text: &str| Some(text.parse::<IpAddr>().expect("address"));
        assert!(authorizer.authorize_from(&alice(), at("10.0.0.1"), Read, Topic, "orders"));
        assert!(!authorizer.authorize_from(&alice(), at("10.0.0.2"), Read, Topic, "orders"));
        assert!(!authorizer.authorize(&alice(), Read, Topic, "orders"));
        // Java writes ::1 in full; both spellings are one address.
        assert!(!authorizer.authorize_from(&alice(), at("::1"), Read, Topic, "orders"));
        assert!(authorizer.authorize_any_from(&alice(), at("10.0.0.1"), Read, Topic));
        assert!(!authorizer.authorize_any_from(&alice(), at("10.0.0.3"), Read, Topic));
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;

    fn alice() -> Principal {
        Principal::user("alice")
    }

    #[test]
    fn allow_grants_only_what_it_names_and_implies() {
        let authorizer = Authorizer::new(
            &[acl(Allow, "alice", Read, Topic, Literal, "orders")],
            [],
            false,
        );
        assert!(authorizer.authorize(&alice(), Read, Topic, "orders"));
        assert!(authorizer.authorize(&alice(), Describe, Topic, "orders"));
        assert!(!authorizer.authorize(&alice(), Write, Topic, "orders"));
        assert!(!authorizer.authorize(&alice(), Read, Topic, "orders2"));
        assert!(!authorizer.authorize(&alice(), Read, Group, "orders"));
        assert!(!authorizer.authorize(&Principal::user("bob"), Read, Topic, "orders"));
    }

    #[test]
    fn deny_wins_over_allow_but_is_not_implied() {
        let authorizer = Authorizer::new(
            &[
                acl(Allow, "*", All, Topic, Literal, "*"),
                acl(Deny, "alice", Read, Topic, Prefixed, "secret-"),
            ],
            [],
            false,
        );
        assert!(!authorizer.authorize(&alice(), Read, Topic, "secret-plans"));
        // A deny of Read does not deny Describe (implication is for allows only).
        assert!(authorizer.authorize(&alice(), Describe, Topic, "secret-plans"));
        assert!(authorizer.authorize(&alice(), Read, Topic, "public"));
        assert!(authorizer.authorize(&Principal::user("bob"), Read, Topic, "secret-plans"));
        let denied_all = Authorizer::new(
            &[
                acl(Allow, "alice", Read, Topic, Literal, "t"),
                acl(Deny, "*", All, Topic, Literal, "t"),
            ],
            [],
            true,
        );
        assert!(!denied_all.authorize(&alice(), Read, Topic, "t"));
        assert!(!denied_all.authorize(&alice(), Describe, Topic, "t"));
    }

    #[test]
    fn prefixes_match_starts_of_names_only() {
        let authorizer = Authorizer::new(
            &[
                acl(Allow, "alice", Write, Topic, Prefixed, "a-"),
                acl(Allow, "alice", Write, Topic, Prefixed, "logs.eu."),
            ],
            [],
            false,
        );
        assert!(authorizer.authorize(&alice(), Write, Topic, "a-1"));
        assert!(authorizer.authorize(&alice(), Write, Topic, "a-"));
        assert!(authorizer.authorize(&alice(), Write, Topic, "logs.eu.x"));
        assert!(!authorizer.authorize(&alice(), Write, Topic, "a"));
        assert!(!authorizer.authorize(&alice(), Write, Topic, "b-a-1"));
        assert!(!authorizer.authorize(&alice(), Write, Topic, "logs.us.x"));
    }

    #[test]
    fn wildcard_name_and_wildcard_principal() {
        let authorizer =
            Authorizer::new(&[acl(Allow, "*", Describe, Group, Literal, "*")], [], false);
        assert!(authorizer.authorize(&Principal::anonymous(), Describe, Group, "any"));
        assert!(!authorizer.authorize(&Principal::anonymous(), Read, Group, "any"));
        // A user literally named "*" is matched by a User:* ACL like anyone else, no more.
        assert!(!authorizer.authorize(&alice(), Describe, Topic, "any"));
    }

    #[test]
    fn super_users_bypass_denies() {
        let authorizer = Authorizer::new(
            &[acl(Deny, "*", All, Cluster, Literal, CLUSTER_NAME)],
            ["admin".to_owned()],
            false,
        );
        let admin = Principal::user("admin");
        assert!(authorizer.authorize(&admin, ClusterAction, Cluster, CLUSTER_NAME));
        assert!(authorizer.authorize(&admin, Write, Topic, "anything"));
        assert!(authorizer.authorize_any(&admin, Write, Topic));
        assert!(!authorizer.authorize(&alice(), ClusterAction, Cluster, CLUSTER_NAME));
    }

    #[test]
    fn no_acl_found_follows_the_default() {
        let acls = [acl(Allow, "bob", Read, Topic, Literal, "bobs")];
        let deny = Authorizer::new(&acls, [], false);
        let allow = Authorizer::new(&acls, [], true);
        assert!(!deny.authorize(&alice(), Read, Topic, "other"));
        assert!(allow.authorize(&alice(), Read, Topic, "other"));
        // An ACL on the resource for someone else counts as found: alice is refused.
        assert!(!allow.authorize(&alice(), Read, Topic, "bobs"));
    }

    #[test]
    fn authorize_any_follows_kip_679() {
        let authorizer = Authorizer::new(
            &[
                acl(Allow, "alice", Write, Topic, Literal, "a"),
                acl(Allow, "bob", Write, Topic, Prefixed, "b-"),
                acl(Deny, "bob", Write, Topic, Prefixed, "b"),
                acl(Allow, "carol", Write, Topic, Literal, "c"),
                acl(Deny, "carol", Write, Topic, Literal, "*"),
            ],
            [],
            false,
        );
        assert!(authorizer.authorize_any(&alice(), Write, Topic));
        assert!(!authorizer.authorize_any(&alice(), Read, Topic));
        assert!(!authorizer.authorize_any(&Principal::user("bob"), Write, Topic));
        assert!(!authorizer.authorize_any(&Principal::user("carol"), Write, Topic));
        assert!(!authorizer.authorize_any(&Principal::user("dave"), Write, Topic));
        let empty = Authorizer::new(&[], [], true);
        assert!(empty.authorize_any(&alice(), Write, Topic));
    }

    fn operation() -> impl Strategy<Value = Operation> {
        proptest::sample::select(Operation::ALL.to_vec())
    }

    fn small_acl() -> impl Strategy<Value = Acl> {
        (
            prop_oneof![Just(Allow), Just(Deny)],
            prop_oneof![Just("alice"), Just("bob"), Just("*")],
            operation(),
            prop_oneof![Just(Literal), Just(Prefixed)],
            "[ab*]{1,3}",
        )
            .prop_map(|(permission, user, operation, pattern_type, name)| {
                acl(permission, user, operation, Topic, pattern_type, &name)
            })
    }

    proptest! {
        /// The index answers exactly what a scan of every ACL with Kafka's rules answers.
        #[test]
        fn index_agrees_with_a_linear_scan(
            acls in proptest::collection::vec(small_acl(), 0..12),
            user in prop_oneof![Just("alice"), Just("bob"), Just("carol")],
            wanted in operation(),
            name in "[ab]{1,4}",
            allow_everyone in any::<bool>(),
        ) {
            let principal = Principal::user(user);
            let authorizer = Authorizer::new(&acls, [], allow_everyone);
            let matching: Vec<&Acl> = acls
                .iter()
                .filter(|acl| acl.pattern.matches(Topic, &name))
                .collect();
            let applies = |acl: &&&Acl| match &acl.principal {
                AclPrincipal::AnyUser => true,
                AclPrincipal::User(named) => named == user,
            };
            let expected = if matching.is_empty() {
                allow_everyone
            } else {
                let denied = matching.iter().filter(applies).any(|acl| {
                    acl.permission == Deny && acl.operation.deny_refuses(wanted)
                });
                let allowed = matching.iter().filter(applies).any(|acl| {
                    acl.permission == Allow && acl.operation.allow_grants(wanted)
                });
                !denied && allowed
            };
            prop_assert_eq!(authorizer.authorize(&principal, wanted, Topic, &name), expected);
        }
    }
}
