//! The ACL file: one ACL per line, `#` starts a comment, blank lines are ignored.
//!
//! ```text
//! <allow|deny> <principal> <operations> <resource> [from <host>]
//! ```
//!
//! - principal: `User:<name>` or `User:*` (every user, authenticated or not);
//! - operations: one or several, comma-separated, of `all`, `read`, `write`, `create`, `delete`,
//!   `alter`, `describe`, `cluster-action`, `describe-configs`, `alter-configs`,
//!   `idempotent-write` (case-insensitive; `ClusterAction` and `CLUSTER_ACTION` work too);
//! - resource: `topic:<name>`, `group:<name>`, `transactional-id:<name>` (a literal name, `*` for
//!   every resource of the type), `<type>:prefixed:<prefix>` (every name starting with the
//!   prefix), `<type>:literal:<name>` (for a literal name that itself starts with `prefixed:` or
//!   `literal:`), and `cluster` (also `cluster:kafka-cluster`);
//! - host: only `*` (any host), the default. ACLs for one client address are made with Kafka's
//!   `kafka-acls.sh --allow-host` (CreateAcls), which the file, now only a bootstrap, does not need.
//!
//! A `#` begins a comment only at the start of a word, so `group:a#b` names the group `a#b`.
//! Names cannot contain whitespace.
//!
//! Must never: read the file itself (callers pass its text), or accept more than
//! [`ACL_FILE_BYTES_MAX`] bytes or [`ACL_COUNT_MAX`] ACLs.

use super::model::{
    Acl, AclPrincipal, Operation, PatternType, Permission, ResourcePattern, ResourceType, ANY_HOST,
    CLUSTER_NAME, WILDCARD_NAME,
};

/// Largest ACL file accepted, in bytes: far above any hand-written file, small enough to read and
/// parse at every reload tick.
pub const ACL_FILE_BYTES_MAX: usize = 1024 * 1024;
/// Most ACLs one file may hold (after comma-separated operations are expanded).
pub const ACL_COUNT_MAX: usize = 10_000;

/// Why an ACL file was refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclFileError {
    /// The file is bigger than [`ACL_FILE_BYTES_MAX`].
    #[error("the ACL file has {bytes} bytes, more than the maximum of {max} bytes")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The maximum.
        max: usize,
    },
    /// The file holds more than [`ACL_COUNT_MAX`] ACLs.
    #[error("the ACL file holds more than {max} ACLs (line {line})")]
    TooManyAcls {
        /// The line where the count passed the maximum.
        line: usize,
        /// The maximum.
        max: usize,
    },
    /// A line that is not an ACL.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters) of the offending word.
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// A word of a line and the 1-based column it starts at.
struct Word<'a> {
    text: &'a str,
    column: usize,
}

/// Splits a line into words, dropping a trailing comment.
fn words(line: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None;
    for (column, (byte, c)) in line.char_indices().enumerate() {
        match (c.is_whitespace(), start) {
            (true, Some((from, from_column))) => {
                out.push(Word {
                    text: &line[from..byte],
                    column: from_column + 1,
                });
                start = None;
            }
            (false, None) if c == '#' => return out,
            (false, None) => start = Some((byte, column)),
            _ => {}
        }
    }
    if let Some((from, from_column)) = start {
        out.push(Word {
            text: &line[from..],
            column: from_column + 1,
        });
    }
    out
}

/// Parses a whole ACL file.
pub fn parse(text: &str) -> Result<Vec<Acl>, AclFileError> {
    if text.len() > ACL_FILE_BYTES_MAX {
        return Err(AclFileError::TooLarge {
            bytes: text.len(),
            max: ACL_FILE_BYTES_MAX,
        });
    }
    let mut acls = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_number = index + 1;
        let words = words(line);
        if words.is_empty() {
            continue;
        }
        let syntax = |column: usize, message: String| AclFileError::Syntax {
            line: line_number,
            column,
            message,
        };
        let end_column = line.chars().count() + 1;
        let word = |position: usize, what: &str| {
            words
                .get(position)
                .ok_or_else(|| syntax(end_column, format!("missing {what}")))
        };
        let permission_word = word(0, "allow or deny")?;
        let permission = match permission_word.text.to_ascii_lowercase().as_str() {
            "allow" => Permission::Allow,
            "deny" => Permission::Deny,
            other => {
                return Err(syntax(
                    permission_word.column,
                    format!("expected allow or deny, found '{other}'"),
                ))
            }
        };
        let principal_word = word(1, "principal (User:<name> or User:*)")?;
        let principal = AclPrincipal::parse(principal_word.text)
            .map_err(|error| syntax(principal_word.column, error.to_string()))?;
        let operations_word = word(2, "operation")?;
        let mut operations = Vec::new();
        for name in operations_word.text.split(',') {
            let operation = Operation::parse(name).ok_or_else(|| {
                syntax(
                    operations_word.column,
                    format!(
                        "unknown operation '{name}' (expected one of {})",
                        Operation::ALL.map(Operation::name).join(", ")
                    ),
                )
            })?;
            if !operations.contains(&operation) {
                operations.push(operation);
            }
        }
        let resource_word = word(3, "resource (for example topic:orders)")?;
        let pattern = parse_resource(resource_word.text)
            .map_err(|error| syntax(resource_word.column, error.to_string()))?;
        match words.get(4) {
            None => {}
            Some(from) if from.text == "from" => {
                let host = word(5, "host after 'from'")?;
                if host.text != ANY_HOST {
                    return Err(syntax(
                        host.column,
                        format!(
                            "host '{}' is not supported: ACLs apply to every host ('from *')",
                            host.text
                        ),
                    ));
                }
                if let Some(extra) = words.get(6) {
                    return Err(syntax(extra.column, format!("unexpected '{}'", extra.text)));
                }
            }
            Some(extra) => {
                return Err(syntax(
                    extra.column,
                    format!("unexpected '{}' (only 'from *' may follow)", extra.text),
                ))
            }
        }
        for operation in operations {
            if acls.len() == ACL_COUNT_MAX {
                return Err(AclFileError::TooManyAcls {
                    line: line_number,
                    max: ACL_COUNT_MAX,
                });
            }
            acls.push(Acl::from_any_host(
                permission,
                principal.clone(),
                operation,
                pattern.clone(),
            ));
        }
    }
    Ok(acls)
}

/// Why a resource word of an ACL line is not a resource pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ResourceError {
    /// The part before the first `:` names no resource type.
    #[error(
        "unknown resource type '{0}' (expected one of {types})",
        types = ResourceType::ALL.map(ResourceType::name).join(", ")
    )]
    UnknownType(String),
    /// The cluster resource written with another name.
    #[error("the cluster resource is written 'cluster' (or 'cluster:{CLUSTER_NAME}'), not '{0}'")]
    ClusterName(String),
    /// A resource type with an empty name.
    #[error(
        "resource '{text}' has no name (write {type_text}:<name>, {type_text}:* or \
         {type_text}:prefixed:<prefix>)"
    )]
    NoName { text: String, type_text: String },
    /// A prefixed pattern whose prefix is `*`.
    #[error("'{text}': a prefix of '*' is not a wildcard; write {type_text}:* for every name")]
    PrefixWildcard { text: String, type_text: String },
}

/// Parses `type:name`, `type:prefixed:prefix`, `type:literal:name` or `cluster`.
fn parse_resource(text: &str) -> Result<ResourcePattern, ResourceError> {
    let (type_text, rest) = text.split_once(':').unwrap_or((text, ""));
    let resource_type = ResourceType::parse(type_text)
        .ok_or_else(|| ResourceError::UnknownType(type_text.to_owned()))?;
    if resource_type == ResourceType::Cluster {
        if rest.is_empty() || rest == CLUSTER_NAME {
            return Ok(ResourcePattern {
                resource_type,
                pattern_type: PatternType::Literal,
                name: CLUSTER_NAME.to_owned(),
            });
        }
        return Err(ResourceError::ClusterName(text.to_owned()));
    }
    let (pattern_type, name) = if let Some(prefix) = rest.strip_prefix("prefixed:") {
        (PatternType::Prefixed, prefix)
    } else if let Some(name) = rest.strip_prefix("literal:") {
        (PatternType::Literal, name)
    } else {
        (PatternType::Literal, rest)
    };
    if name.is_empty() {
        return Err(ResourceError::NoName {
            text: text.to_owned(),
            type_text: type_text.to_owned(),
        });
    }
    if pattern_type == PatternType::Prefixed && name == WILDCARD_NAME {
        return Err(ResourceError::PrefixWildcard {
            text: text.to_owned(),
            type_text: type_text.to_owned(),
        });
    }
    Ok(ResourcePattern {
        resource_type,
        pattern_type,
        name: name.to_owned(),
    })
}

/// One ACL as a file line (without a newline); [`parse`] reads it back to the same ACL.
pub fn format_acl(acl: &Acl) -> String {
    let pattern = &acl.pattern;
    let resource = match (pattern.resource_type, pattern.pattern_type) {
        (ResourceType::Cluster, PatternType::Literal) if pattern.name == CLUSTER_NAME => {
            "cluster".to_owned()
        }
        (kind, PatternType::Prefixed) => format!("{}:prefixed:{}", kind.name(), pattern.name),
        (kind, PatternType::Literal)
            if pattern.name.starts_with("prefixed:") || pattern.name.starts_with("literal:") =>
        {
            format!("{}:literal:{}", kind.name(), pattern.name)
        }
        (kind, PatternType::Literal) => format!("{}:{}", kind.name(), pattern.name),
    };
    format!(
        "{} {} {} {}",
        acl.permission.name(),
        acl.principal,
        acl.operation.name(),
        resource
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_brief_examples_parse() {
        let acls = parse(
            "# comment line\n\
             \n\
             allow User:alice read topic:orders   # trailing comment\n\
             allow User:alice write topic:prefixed:orders-\n\
             deny User:bob describe group:*\n\
             allow User:* idempotent-write,describe cluster from *\n\
             allow User:svc Write transactional-id:literal:prefixed:x\n",
        )
        .expect("parses");
        let lines: Vec<String> = acls.iter().map(format_acl).collect();
        assert_eq!(
            lines,
            [
                "allow User:alice read topic:orders",
                "allow User:alice write topic:prefixed:orders-",
                "deny User:bob describe group:*",
                "allow User:* idempotent-write cluster",
                "allow User:* describe cluster",
                "allow User:svc write transactional-id:literal:prefixed:x",
            ]
        );
        assert_eq!(acls[1].pattern.pattern_type, PatternType::Prefixed);
        assert_eq!(acls[1].pattern.name, "orders-");
        assert_eq!(acls[3].pattern.name, CLUSTER_NAME);
        assert_eq!(acls[5].pattern.name, "prefixed:x");
        assert_eq!(acls[5].pattern.pattern_type, PatternType::Literal);
    }

    #[test]
    fn the_example_file_parses() {
        let acls = parse(include_str!("../../../examples/acls.txt")).expect("example parses");
        assert_eq!(acls.len(), 11);
    }

    #[test]
    fn hash_inside_a_word_is_part_of_the_name() {
        let acls = parse("allow User:a read group:a#b #c").expect("parses");
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].pattern.name, "a#b");
    }

    fn syntax_at(text: &str) -> (usize, usize, String) {
        match parse(text) {
            Err(AclFileError::Syntax {
                line,
                column,
                message,
            }) => (line, column, message),
            other => panic!("expected a syntax error for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_line_and_column() {
        let (line, column, message) = syntax_at("# ok\nallow User:a reed topic:t\n");
        assert_eq!((line, column), (2, 14));
        assert!(message.contains("unknown operation 'reed'"), "{message}");
        let (line, column, _) = syntax_at("allow User:a read\n");
        assert_eq!((line, column), (1, 18));
        let (_, column, message) = syntax_at("  permit User:a read topic:t");
        assert_eq!(column, 3);
        assert!(message.contains("allow or deny"));
        let (_, column, message) = syntax_at("allow Group:a read topic:t");
        assert_eq!(column, 7);
        assert!(message.contains("only User"));
        let (_, column, message) = syntax_at("allow User:a read table:t");
        assert_eq!(column, 19);
        assert!(message.contains("unknown resource type"));
        let (_, _, message) = syntax_at("allow User:a read topic:");
        assert!(message.contains("no name"));
        let (_, _, message) = syntax_at("allow User:a read topic:prefixed:*");
        assert!(message.contains("not a wildcard"));
        let (_, _, message) = syntax_at("allow User:a read cluster:other");
        assert!(message.contains("cluster"));
        let (_, column, message) = syntax_at("allow User:a read topic:t from 10.0.0.1");
        assert_eq!(column, 32);
        assert!(message.contains("not supported"));
        let (_, column, _) = syntax_at("allow User:a read topic:t extra");
        assert_eq!(column, 27);
        let (_, column, _) = syntax_at("allow User:a read topic:t from");
        assert_eq!(column, 31);
    }

    #[test]
    fn limits_are_enforced() {
        let big = "#".repeat(ACL_FILE_BYTES_MAX + 1);
        assert!(matches!(parse(&big), Err(AclFileError::TooLarge { .. })));
        let line = "allow User:a read,write topic:t\n";
        let many = line.repeat(ACL_COUNT_MAX / 2 + 1);
        assert_eq!(
            parse(&many),
            Err(AclFileError::TooManyAcls {
                line: ACL_COUNT_MAX / 2 + 1,
                max: ACL_COUNT_MAX
            })
        );
        assert_eq!(
            parse(&line.repeat(ACL_COUNT_MAX / 2))
                .map(|acls| acls.len())
                .ok(),
            Some(ACL_COUNT_MAX)
        );
    }

    fn any_acl() -> impl Strategy<Value = Acl> {
        let principal = prop_oneof![
            Just(AclPrincipal::AnyUser),
            "[A-Za-z0-9_.@=,-]{1,12}".prop_map(AclPrincipal::User),
        ];
        let pattern = prop_oneof![
            Just(ResourcePattern {
                resource_type: ResourceType::Cluster,
                pattern_type: PatternType::Literal,
                name: CLUSTER_NAME.to_owned(),
            }),
            (
                proptest::sample::select(vec![
                    ResourceType::Topic,
                    ResourceType::Group,
                    ResourceType::TransactionalId
                ]),
                prop_oneof![Just(PatternType::Literal), Just(PatternType::Prefixed)],
                prop_oneof![
                    Just("*".to_owned()),
                    Just("prefixed:x".to_owned()),
                    Just("literal:".to_owned()),
                    "[a-z0-9._:#*-]{1,12}",
                ],
            )
                .prop_filter("a prefix of * is refused", |(_, kind, name)| {
                    !(*kind == PatternType::Prefixed && name == "*")
                })
                .prop_map(|(resource_type, pattern_type, name)| ResourcePattern {
                    resource_type,
                    pattern_type,
                    name,
                }),
        ];
        (
            prop_oneof![Just(Permission::Allow), Just(Permission::Deny)],
            principal,
            proptest::sample::select(Operation::ALL.to_vec()),
            pattern,
        )
            .prop_map(|(permission, principal, operation, pattern)| {
                Acl::from_any_host(permission, principal, operation, pattern)
            })
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(acls in proptest::collection::vec(any_acl(), 0..20)) {
            let text: String = acls.iter().map(|acl| format_acl(acl) + "\n").collect();
            prop_assert_eq!(parse(&text), Ok(acls));
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }
}
