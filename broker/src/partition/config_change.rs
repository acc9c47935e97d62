//! What an AlterConfigs or IncrementalAlterConfigs request does to one resource's config overrides,
//! decided as Kafka decides it (`ConfigAdminManager.preprocess` and the controller's
//! `incrementalAlterConfigResource`): duplicate keys and null values are INVALID_REQUEST, APPEND and
//! SUBTRACT only on list-typed keys (else INVALID_CONFIG), an unknown operation INVALID_REQUEST.
//! Values themselves are checked afterwards by [`crate::partition::topic_config::TopicConfig`].
//!
//! Pure code over maps and strings. Must never: touch the topic registry, storage or the clock, or
//! accept a change whose result it did not compute completely.

use std::collections::BTreeMap;

use skiff_protocol::error_code;

/// IncrementalAlterConfigs' `config_operation`, Kafka's `AlterConfigOp.OpType` ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigOp {
    /// 0: set the value.
    Set,
    /// 1: remove the override (the default applies again).
    Delete,
    /// 2: add items to a list value.
    Append,
    /// 3: remove items from a list value.
    Subtract,
}

impl ConfigOp {
    /// The operation with Kafka's id, if it is one.
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => Self::Set,
            1 => Self::Delete,
            2 => Self::Append,
            3 => Self::Subtract,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Set => "SET",
            Self::Delete => "DELETE",
            Self::Append => "APPEND",
            Self::Subtract => "SUBTRACT",
        }
    }
}

/// Why a config change was refused, with the message the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigChangeError {
    /// The request is malformed for this resource (INVALID_REQUEST).
    #[error("{0}")]
    InvalidRequest(String),
    /// The change is well formed but not allowed (INVALID_CONFIG).
    #[error("{0}")]
    InvalidConfig(String),
}

impl ConfigChangeError {
    /// The Kafka error code.
    pub fn code(&self) -> i16 {
        match self {
            Self::InvalidRequest(_) => error_code::INVALID_REQUEST,
            Self::InvalidConfig(_) => error_code::INVALID_CONFIG,
        }
    }
}

/// One requested change: key, operation id as sent, value.
pub type IncrementalChange = (String, i8, Option<String>);

fn check_duplicates<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), ConfigChangeError> {
    let mut seen = std::collections::BTreeSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(ConfigChangeError::InvalidRequest(
                "Error due to duplicate config keys".to_owned(),
            ));
        }
    }
    Ok(())
}

fn check_no_nulls<'a>(null_names: impl Iterator<Item = &'a str>) -> Result<(), ConfigChangeError> {
    let nulls: Vec<&str> = null_names.collect();
    if nulls.is_empty() {
        Ok(())
    } else {
        Err(ConfigChangeError::InvalidRequest(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )))
    }
}

/// Checks the shape of an IncrementalAlterConfigs resource (any resource type): no key twice, a
/// value for every operation but DELETE, only known operations.
pub fn check_incremental(changes: &[IncrementalChange]) -> Result<(), ConfigChangeError> {
    check_duplicates(changes.iter().map(|(name, _, _)| name.as_str()))?;
    check_no_nulls(
        changes
            .iter()
            .filter(|(_, op, value)| {
                ConfigOp::from_id(*op) != Some(ConfigOp::Delete) && value.is_none()
            })
            .map(|(name, _, _)| name.as_str()),
    )?;
    if let Some((_, op, _)) = changes
        .iter()
        .find(|(_, op, _)| ConfigOp::from_id(*op).is_none())
    {
        return Err(ConfigChangeError::InvalidRequest(format!(
            "Unknown operations type {op}"
        )));
    }
    Ok(())
}

/// Checks the shape of an AlterConfigs resource: no key twice, no null value.
pub fn check_whole(changes: &[(String, Option<String>)]) -> Result<(), ConfigChangeError> {
    check_duplicates(changes.iter().map(|(name, _)| name.as_str()))?;
    check_no_nulls(
        changes
            .iter()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.as_str()),
    )
}

/// The overrides after IncrementalAlterConfigs `changes` (already [`check_incremental`]ed) on
/// `current`. `is_list` says which keys are list-typed; `effective` gives a key's value in force
/// (override or default), the base of APPEND and SUBTRACT.
pub fn apply_incremental(
    current: &BTreeMap<String, String>,
    changes: &[IncrementalChange],
    is_list: impl Fn(&str) -> bool,
    effective: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, ConfigChangeError> {
    check_incremental(changes)?;
    let mut overrides = current.clone();
    for (name, op, value) in changes {
        let op = ConfigOp::from_id(*op).ok_or_else(|| {
            ConfigChangeError::InvalidRequest(format!("Unknown operations type {op}"))
        })?;
        let value = value.as_deref().unwrap_or_default();
        match op {
            ConfigOp::Set => {
                overrides.insert(name.clone(), value.to_owned());
            }
            ConfigOp::Delete => {
                overrides.remove(name);
            }
            ConfigOp::Append | ConfigOp::Subtract => {
                if !is_list(name) {
                    return Err(ConfigChangeError::InvalidConfig(format!(
                        "Can't {} to key {name} because its type is not LIST.",
                        op.name()
                    )));
                }
                let base = overrides
                    .get(name)
                    .cloned()
                    .or_else(|| effective(name))
                    .unwrap_or_default();
                let mut items: Vec<String> = list_items(&base);
                for item in list_items(value) {
                    if op == ConfigOp::Append {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|kept| *kept != item);
                    }
                }
                overrides.insert(name.clone(), items.join(","));
            }
        }
    }
    Ok(overrides)
}

/// The overrides after AlterConfigs `changes`: exactly the keys given (every other override is
/// removed, as Kafka's legacy AlterConfigs does).
pub fn apply_whole(
    changes: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, ConfigChangeError> {
    check_whole(changes)?;
    Ok(changes
        .iter()
        .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
        .collect())
}

fn list_items(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(name: &str, op: i8, value: Option<&str>) -> IncrementalChange {
        (name.to_owned(), op, value.map(str::to_owned))
    }

    fn is_list(key: &str) -> bool {
        key == "cleanup.policy"
    }

    fn effective(key: &str) -> Option<String> {
        (key == "cleanup.policy").then(|| "delete".to_owned())
    }

    #[test]
    fn set_and_delete_change_only_their_keys() {
        let current = BTreeMap::from([
            ("retention.ms".to_owned(), "1000".to_owned()),
            ("segment.ms".to_owned(), "5000".to_owned()),
        ]);
        let changes = [
            change("retention.ms", 1, None),
            change("max.message.bytes", 0, Some("2048")),
        ];
        let after = apply_incremental(&current, &changes, is_list, effective).expect("valid");
        assert_eq!(
            after,
            BTreeMap::from([
                ("max.message.bytes".to_owned(), "2048".to_owned()),
                ("segment.ms".to_owned(), "5000".to_owned()),
            ])
        );
    }

    #[test]
    fn append_and_subtract_only_on_list_keys() {
        let empty = BTreeMap::new();
        let appended = apply_incremental(
            &empty,
            &[change("cleanup.policy", 2, Some("compact"))],
            is_list,
            effective,
        )
        .expect("list key");
        assert_eq!(appended["cleanup.policy"], "delete,compact");
        let subtracted = apply_incremental(
            &appended,
            &[change("cleanup.policy", 3, Some("compact"))],
            is_list,
            effective,
        )
        .expect("list key");
        assert_eq!(subtracted["cleanup.policy"], "delete");
        let error = apply_incremental(
            &empty,
            &[change("retention.ms", 2, Some("1"))],
            is_list,
            effective,
        )
        .expect_err("not a list");
        assert_eq!(error.code(), error_code::INVALID_CONFIG);
        assert!(error.to_string().contains("retention.ms"));
    }

    #[test]
    fn malformed_changes_are_invalid_requests() {
        let empty = BTreeMap::new();
        for changes in [
            vec![change("a", 0, Some("1")), change("a", 1, None)],
            vec![change("a", 0, None)],
            vec![change("a", 9, Some("1"))],
        ] {
            let error = apply_incremental(&empty, &changes, is_list, effective).expect_err("bad");
            assert_eq!(error.code(), error_code::INVALID_REQUEST, "{changes:?}");
        }
        // DELETE needs no value.
        assert!(check_incremental(&[change("a", 1, None)]).is_ok());
        assert_eq!(
            check_whole(&[("a".to_owned(), None)]).map_err(|error| error.code()),
            Err(error_code::INVALID_REQUEST)
        );
    }

    proptest::proptest! {
        /// SET then DELETE of a key leaves every other override as it was and the key gone;
        /// APPEND of a new item then SUBTRACT of it gives back the list in force before.
        #[test]
        fn set_delete_and_append_subtract_undo_each_other(
            current in proptest::collection::btree_map("[a-d]\\.[a-d]", "[0-9]{1,3}", 0..5),
            key in "[a-d]\\.[a-d]",
            value in "[0-9]{1,3}",
            base in proptest::collection::vec("[a-c]", 0..4),
        ) {
            let set = apply_incremental(&current, &[change(&key, 0, Some(&value))], is_list, effective)
                .expect("set");
            proptest::prop_assert_eq!(set.get(&key), Some(&value));
            let deleted = apply_incremental(&set, &[change(&key, 1, None)], is_list, effective)
                .expect("delete");
            let mut expected = current.clone();
            expected.remove(&key);
            proptest::prop_assert_eq!(deleted, expected);

            let mut listed = current.clone();
            let mut unique = base.clone();
            unique.dedup();
            listed.insert("cleanup.policy".to_owned(), unique.join(","));
            let appended = apply_incremental(
                &listed, &[change("cleanup.policy", 2, Some("zz"))], is_list, effective,
            ).expect("append");
            let subtracted = apply_incremental(
                &appended, &[change("cleanup.policy", 3, Some("zz"))], is_list, effective,
            ).expect("subtract");
            proptest::prop_assert_eq!(subtracted, listed);
        }
    }

    #[test]
    fn alter_configs_replaces_the_whole_set() {
        let after = apply_whole(&[("retention.ms".to_owned(), Some("5".to_owned()))]).expect("ok");
        assert_eq!(after.len(), 1);
        assert_eq!(after["retention.ms"], "5");
    }
}
