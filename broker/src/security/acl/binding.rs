//! ACLs as Kafka's admin APIs carry them: a binding of wire codes and strings
//! ([`skiff_cluster::security::AclRecord`], also the stored form), checked as Kafka's
//! `AclControlManager` checks a new ACL ([`validate_new`]); the filters of DescribeAcls and
//! DeleteAcls ([`AclFilter`], Kafka's `AclBindingFilter` rules, `MATCH` and `ANY` included); and
//! the conversion to the authorizer's [`Acl`].
//!
//! Must never: touch the store or decide an authorization (the authorizer does).

use skiff_cluster::security::{AclRecord, ACL_FIELD_BYTES_MAX};

use super::model::{
    Acl, AclPrincipal, Operation, PatternType, Permission, ResourcePattern, ResourceType, ANY_HOST,
    CLUSTER_NAME, WILDCARD_NAME,
};

/// Kafka's code for "any" in every filter field.
pub const ANY_CODE: i8 = 1;
/// Kafka's pattern-type filter MATCH: every pattern that applies to the named resource.
pub const MATCH_CODE: i8 = 2;

/// Why an ACL or a filter was refused: Kafka's INVALID_REQUEST with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// A resource type Kafka does not accept in a new ACL (UNKNOWN, ANY or no such code).
    #[error("Invalid resourceType {0}")]
    ResourceType(i8),
    /// A pattern type other than LITERAL or PREFIXED in a new ACL.
    #[error("Invalid patternType {0}")]
    PatternType(i8),
    /// An operation Kafka does not accept in a new ACL.
    #[error("Invalid operation {0}")]
    Operation(i8),
    /// A permission other than ALLOW or DENY in a new ACL.
    #[error("Invalid permissionType {0}")]
    Permission(i8),
    /// A principal that is not `Type:name`, or one Skiff cannot match (only `User` principals
    /// exist on Skiff's connections).
    #[error("Could not parse principal from `{0}` (no colon is present separating the principal type from the principal name, or the type is not User)")]
    Principal(String),
    /// An empty resource name.
    #[error("Invalid empty resource name")]
    EmptyName,
    /// A cluster ACL whose name is not `kafka-cluster`.
    #[error("The only valid name for the CLUSTER resource is kafka-cluster")]
    ClusterName,
    /// A name, principal or host longer than [`ACL_FIELD_BYTES_MAX`].
    #[error("{what} of {bytes} bytes is longer than the {max} bytes Skiff stores")]
    TooLong {
        /// Which field.
        what: &'static str,
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A filter field whose code is UNKNOWN (0) or not Kafka's.
    #[error("Unknown {0}")]
    UnknownFilter(&'static str),
}

/// Checks a new ACL as Kafka does, and returns it as the authorizer's [`Acl`].
pub fn validate_new(record: &AclRecord) -> Result<Acl, BindingError> {
    let resource_type = ResourceType::from_code(record.resource_type)
        .ok_or(BindingError::ResourceType(record.resource_type))?;
    let pattern_type = PatternType::from_code(record.pattern_type)
        .ok_or(BindingError::PatternType(record.pattern_type))?;
    let operation =
        Operation::from_code(record.operation).ok_or(BindingError::Operation(record.operation))?;
    let permission = Permission::from_code(record.permission)
        .ok_or(BindingError::Permission(record.permission))?;
    for (what, text) in [
        ("resource name", &record.name),
        ("principal", &record.principal),
        ("host", &record.host),
    ] {
        if text.len() > ACL_FIELD_BYTES_MAX {
            return Err(BindingError::TooLong {
                what,
                bytes: text.len(),
                max: ACL_FIELD_BYTES_MAX,
            });
        }
    }
    let principal = AclPrincipal::parse(&record.principal)
        .map_err(|_| BindingError::Principal(record.principal.clone()))?;
    if resource_type == ResourceType::Cluster && record.name != CLUSTER_NAME {
        return Err(BindingError::ClusterName);
    }
    if record.name.is_empty() {
        return Err(BindingError::EmptyName);
    }
    Ok(Acl {
        permission,
        principal,
        operation,
        pattern: ResourcePattern {
            resource_type,
            pattern_type,
            name: record.name.clone(),
        },
        host: record.host.clone(),
    })
}

/// An [`Acl`] as Kafka's binding (the file's ACLs are stored so at their import).
pub fn record_of(acl: &Acl) -> AclRecord {
    AclRecord {
        resource_type: acl.pattern.resource_type.code(),
        name: acl.pattern.name.clone(),
        pattern_type: acl.pattern.pattern_type.code(),
        principal: acl.principal.to_string(),
        host: if acl.host.is_empty() {
            ANY_HOST.to_owned()
        } else {
            acl.host.clone()
        },
        operation: acl.operation.code(),
        permission: acl.permission.code(),
    }
}

/// A DescribeAcls or DeleteAcls filter, as Kafka's `AclBindingFilter`: codes (ANY 1 matches
/// every value; the pattern type also takes MATCH 2) and optional strings (absent matches all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// Resource type code, or ANY.
    pub resource_type: i8,
    /// The resource name, or any.
    pub name: Option<String>,
    /// Pattern type code, ANY or MATCH.
    pub pattern_type: i8,
    /// `User:<name>`, or any.
    pub principal: Option<String>,
    /// A host, or any.
    pub host: Option<String>,
    /// Operation code, or ANY.
    pub operation: i8,
    /// Permission code, or ANY.
    pub permission: i8,
}

impl AclFilter {
    /// Refuses the codes Kafka refuses in a filter (UNKNOWN, or none of Kafka's).
    pub fn validate(&self) -> Result<(), BindingError> {
        let known = |code: i8, valid: bool| code == ANY_CODE || valid;
        if !known(
            self.pattern_type,
            self.pattern_type == MATCH_CODE || PatternType::from_code(self.pattern_type).is_some(),
        ) {
            return Err(BindingError::UnknownFilter("patternFilter."));
        }
        if !known(
            self.permission,
            Permission::from_code(self.permission).is_some(),
        ) {
            return Err(BindingError::UnknownFilter("permissionFilter."));
        }
        if !known(
            self.operation,
            Operation::from_code(self.operation).is_some(),
        ) {
            return Err(BindingError::UnknownFilter("operationFilter."));
        }
        if !known(
            self.resource_type,
            ResourceType::from_code(self.resource_type).is_some(),
        ) {
            return Err(BindingError::UnknownFilter("resourceTypeFilter."));
        }
        Ok(())
    }

    /// Whether `acl` matches, by Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, acl: &AclRecord) -> bool {
        let code_matches = |filter: i8, value: i8| filter == ANY_CODE || filter == value;
        code_matches(self.resource_type, acl.resource_type)
            && self.pattern_matches(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && code_matches(self.operation, acl.operation)
            && code_matches(self.permission, acl.permission)
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    fn pattern_matches(&self, acl: &AclRecord) -> bool {
        if self.pattern_type != ANY_CODE
            && self.pattern_type != MATCH_CODE
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == ANY_CODE || self.pattern_type == acl.pattern_type {
            return *name == acl.name;
        }
        // MATCH: the patterns that apply to the resource `name`.
        match PatternType::from_code(acl.pattern_type) {
            Some(PatternType::Literal) => *name == acl.name || acl.name == WILDCARD_NAME,
            Some(PatternType::Prefixed) => name.starts_with(acl.name.as_str()),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(resource_type: i8, name: &str, pattern_type: i8) -> AclRecord {
        AclRecord {
            resource_type,
            name: name.to_owned(),
            pattern_type,
            principal: "User:alice".to_owned(),
            host: "*".to_owned(),
            operation: Operation::Read.code(),
            permission: Permission::Allow.code(),
        }
    }

    fn any_filter() -> AclFilter {
        AclFilter {
            resource_type: ANY_CODE,
            name: None,
            pattern_type: ANY_CODE,
            principal: None,
            host: None,
            operation: ANY_CODE,
            permission: ANY_CODE,
        }
    }

    #[test]
    fn new_acls_are_checked_with_kafkas_messages() {
        assert!(validate_new(&record(2, "orders", 3)).is_ok());
        assert_eq!(
            validate_new(&record(1, "orders", 3)),
            Err(BindingError::ResourceType(1))
        );
        assert_eq!(
            validate_new(&record(2, "orders", 2)),
            Err(BindingError::PatternType(2))
        );
        assert_eq!(
            validate_new(&record(4, "other", 3)),
            Err(BindingError::ClusterName)
        );
        assert_eq!(
            validate_new(&record(2, "", 3)),
            Err(BindingError::EmptyName)
        );
        let mut bad = record(2, "t", 3);
        bad.principal = "alice".to_owned();
        assert!(matches!(
            validate_new(&bad),
            Err(BindingError::Principal(_))
        ));
        let mut bad = record(2, "t", 3);
        bad.operation = 1;
        assert_eq!(validate_new(&bad), Err(BindingError::Operation(1)));
        let mut bad = record(2, "t", 3);
        bad.permission = 0;
        assert_eq!(validate_new(&bad), Err(BindingError::Permission(0)));
        let acl = validate_new(&record(3, "g-", 4)).expect("valid");
        assert_eq!(record_of(&acl), record(3, "g-", 4));
    }

    #[test]
    fn filters_match_as_kafkas() {
        let literal = record(2, "orders", 3);
        let wildcard = record(2, "*", 3);
        let prefixed = record(2, "ord", 4);
        let mut filter = any_filter();
        assert!(filter.matches(&literal) && filter.matches(&wildcard) && filter.matches(&prefixed));
        filter.name = Some("orders".to_owned());
        // ANY with a name: that exact name, any pattern type.
        assert!(filter.matches(&literal) && !filter.matches(&wildcard));
        assert!(!filter.matches(&prefixed));
        filter.pattern_type = MATCH_CODE;
        assert!(filter.matches(&literal) && filter.matches(&wildcard) && filter.matches(&prefixed));
        filter.pattern_type = 4;
        assert!(!filter.matches(&prefixed));
        filter.name = Some("ord".to_owned());
        assert!(filter.matches(&prefixed) && !filter.matches(&literal));
        let mut by_host = any_filter();
        by_host.host = Some("10.0.0.1".to_owned());
        assert!(!by_host.matches(&literal));
        let mut bad = any_filter();
        bad.operation = 0;
        assert!(bad.validate().is_err());
        bad.operation = 99;
        assert!(bad.validate().is_err());
        assert!(any_filter().validate().is_ok());
    }

    proptest! {
        /// Any codes and strings: validation and matching answer without panicking, and an ACL
        /// that validates converts back to the same binding.
        #[test]
        fn any_binding_is_answered(
            codes in proptest::array::uniform5(any::<i8>()),
            name in "[a-z*]{0,4}",
            principal in "(User:)?[a-z*]{0,3}",
        ) {
            let [resource_type, pattern_type, operation, permission, filter_pattern] = codes;
            let record = AclRecord {
                resource_type,
                name: name.clone(),
                pattern_type,
                principal,
                host: "*".to_owned(),
                operation,
                permission,
            };
            if let Ok(acl) = validate_new(&record) {
                prop_assert_eq!(record_of(&acl), record.clone());
            }
            let filter = AclFilter {
                pattern_type: filter_pattern,
                name: Some(name),
                ..any_filter()
            };
            let _ = filter.validate();
            let _ = filter.matches(&record);
        }
    }
}
