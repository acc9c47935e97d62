//! DescribeTransactions and ListTransactions (KIP-664): read-only views of the ids held here.
//!
//! Must never: change an id, or describe an id of a partition not loaded here.

use skiff_protocol::error_code::ErrorCode;

use crate::coordinator::{Coordinator, RequestMeta, Response, TxnDescription, TxnListing};
use crate::state::TxnState;

/// Most heap a compiled transactional-id pattern may take: a pattern that needs more is refused
/// as invalid rather than compiled (the regex crate's own bound on a compiled program).
pub const ID_PATTERN_COMPILED_BYTES_MAX: usize = 1 << 20;

/// ListTransactions' filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilters {
    /// State names (empty: every state).
    pub states: Vec<String>,
    /// Producer ids (empty: every producer).
    pub producer_ids: Vec<i64>,
    /// v1: only transactions running longer than this (ms); negative: no filter.
    pub duration_ms: i64,
    /// v2 (KIP-1152): only transactional ids the pattern matches whole; `None`: every id.
    pub id_pattern: Option<IdPattern>,
}

/// A transactional-id pattern of ListTransactions v2, compiled once per request. Kafka compiles
/// it with RE2/J and keeps an id only if the whole id matches; the regex crate has RE2's syntax
/// and linear-time matching, so a hostile pattern costs at most its bounded compilation.
#[derive(Debug, Clone)]
pub struct IdPattern {
    whole: regex::Regex,
}

/// A pattern that does not compile: Kafka's INVALID_REGULAR_EXPRESSION, with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Transaction ID pattern `{pattern}` is not a valid regular expression: {reason}.")]
pub struct IdPatternError {
    /// The pattern as sent.
    pub pattern: String,
    /// Why it does not compile.
    pub reason: String,
}

impl IdPattern {
    /// The filter for `pattern`: `None` for a null or empty one (every id, as Kafka), else the
    /// compiled pattern anchored at both ends.
    pub fn compile(pattern: Option<&str>) -> Result<Option<Self>, IdPatternError> {
        let Some(source) = pattern.filter(|text| !text.is_empty()) else {
            return Ok(None);
        };
        let whole = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(ID_PATTERN_COMPILED_BYTES_MAX)
            .build()
            .map_err(|error| IdPatternError {
                pattern: source.to_owned(),
                reason: error.to_string(),
            })?;
        Ok(Some(Self { whole }))
    }

    /// Whether the whole of `id` matches.
    pub fn matches(&self, id: &str) -> bool {
        self.whole.is_match(id)
    }
}

impl PartialEq for IdPattern {
    fn eq(&self, other: &Self) -> bool {
        // The anchored source: equal patterns compile from equal text.
        self.whole.as_str() == other.whole.as_str()
    }
}

impl Eq for IdPattern {}

impl Coordinator {
    /// DescribeTransactions for `ids`, in order.
    pub fn handle_describe(&mut self, meta: RequestMeta, ids: Vec<String>) {
        let descriptions = ids.into_iter().map(|id| self.describe_one(id)).collect();
        self.reply(meta, Response::DescribeTransactions(descriptions));
    }

    fn describe_one(&self, transactional_id: String) -> TxnDescription {
        let error = match self.coordination_error(&transactional_id) {
            ErrorCode::NONE => match self.entries.get(&transactional_id) {
                Some(entry) if entry.meta.state != TxnState::Dead => {
                    return TxnDescription {
                        transactional_id,
                        error: ErrorCode::NONE,
                        state: entry.meta.state.name().to_owned(),
                        metadata: Some(entry.meta.clone()),
                    };
                }
                _ => ErrorCode::TRANSACTIONAL_ID_NOT_FOUND,
            },
            error => error,
        };
        TxnDescription {
            transactional_id,
            error,
            state: String::new(),
            metadata: None,
        }
    }

    /// ListTransactions: the ids of every loaded partition passing `filters`.
    pub fn handle_list(&mut self, now_ms: i64, meta: RequestMeta, filters: ListFilters) {
        let mut unknown_state_filters = Vec::new();
        let mut states = Vec::new();
        for name in &filters.states {
            match TxnState::from_name(name) {
                Some(state) => states.push(state),
                None => unknown_state_filters.push(name.clone()),
            }
        }
        let loading = self.led.values().any(|led| !led.loaded);
        let error = if loading {
            ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
        } else {
            ErrorCode::NONE
        };
        let transactions = if loading {
            Vec::new()
        } else {
            self.entries
                .iter()
                .filter(|(id, entry)| {
                    let meta = &entry.meta;
                    (filters.states.is_empty() || states.contains(&meta.state))
                        && (filters.producer_ids.is_empty()
                            || filters.producer_ids.contains(&meta.producer_id))
                        && (filters.duration_ms < 0
                            || now_ms.saturating_sub(meta.start_ms) > filters.duration_ms)
                        && meta.state != TxnState::Dead
                        && filters
                            .id_pattern
                            .as_ref()
                            .is_none_or(|pattern| pattern.matches(id))
                })
                .map(|(id, entry)| (id.clone(), entry.meta.producer_id, entry.meta.state.name()))
                .collect()
        };
        self.reply(
            meta,
            Response::ListTransactions(TxnListing {
                error,
                unknown_state_filters,
                transactions,
            }),
        );
    }
}
