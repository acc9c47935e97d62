//! The bound column of the key table: what values one key accepts on its own, as data, so that
//! `Config::validate` is a loop over the table, `skiff config-keys` shows every bound, and a test
//! walks every bounded key just outside and at its bound. Rules that relate several keys are in
//! `rules.rs`.
//!
//! Must never: look at another key (a bound that needs one is a cross-key rule).

use std::fmt;

/// What a number's bound counts, as its error and `skiff config-keys` say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Milliseconds.
    Milliseconds,
    /// Seconds.
    Seconds,
    /// Percent.
    Percent,
    /// A plain count (partitions, replicas, threads, connections, messages, an id).
    Count,
}

impl Unit {
    /// The words after a number, with the space before them (`Count` has none).
    fn suffix(self, number: i128) -> &'static str {
        match (self, number) {
            (Self::Bytes, 1) => " byte",
            (Self::Bytes, _) => " bytes",
            (Self::Milliseconds, _) => " ms",
            (Self::Seconds, 1) => " second",
            (Self::Seconds, _) => " seconds",
            (Self::Percent, _) => " %",
            (Self::Count, _) => "",
        }
    }
}

/// A text rule too rich for a list of allowed values; checked by the module that owns the syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRule {
    /// A cluster name the metadata store's key layout can hold (`skiff_cluster::Layout::new`).
    ClusterName,
}

impl TextRule {
    fn admits(self, text: &str) -> bool {
        match self {
            Self::ClusterName => skiff_cluster::Layout::new(text).is_ok(),
        }
    }

    /// A value the rule refuses and one it accepts, for the tests that walk the table.
    #[cfg(test)]
    fn examples(self) -> (&'static str, &'static str) {
        match self {
            Self::ClusterName => ("a/b", "prod-eu.1"),
        }
    }
}

impl fmt::Display for TextRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ClusterName => {
                "a cluster name: 1 to 64 bytes of ASCII letters, digits, '-', '_' and '.'"
            }
        })
    }
}

/// What one key accepts on its own. Numbers are compared as `i128`, which holds every integer
/// type a key has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// At least this much.
    AtLeast(i128, Unit),
    /// At most this much.
    AtMost(i128, Unit),
    /// Between the two, both included.
    Between(i128, i128, Unit),
    /// Milliseconds that are whole seconds, between the two (both included).
    WholeSecondsBetween(i128, i128),
    /// -1, which means what the text says, or at least 1.
    MinusOneOrPositive(&'static str, Unit),
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// Text that the rule accepts.
    Text(TextRule),
}

/// A key's value as a bound sees it.
#[derive(Debug, Clone, Copy)]
pub enum BoundedValue<'a> {
    /// An integer key.
    Number(i128),
    /// A text key.
    Text(&'a str),
}

/// The value of a key type that can carry a bound.
pub trait Bounded {
    /// The value as a bound sees it.
    fn bounded(&self) -> BoundedValue<'_>;
}

macro_rules! bounded_number {
    ($($ty:ty),*) => {$(
        impl Bounded for $ty {
            fn bounded(&self) -> BoundedValue<'_> {
                BoundedValue::Number(*self as i128)
            }
        }
    )*};
}
bounded_number!(i16, i32, i64, u32, u64, usize);

impl Bounded for String {
    fn bounded(&self) -> BoundedValue<'_> {
        BoundedValue::Text(self)
    }
}

impl Bound {
    /// Whether `value` keeps the bound. A number under a text bound (or the reverse) never does,
    /// so a mistyped table row fails the defaults' test.
    pub fn admits(&self, value: BoundedValue<'_>) -> bool {
        match (*self, value) {
            (Self::AtLeast(min, _), BoundedValue::Number(n)) => n >= min,
            (Self::AtMost(max, _), BoundedValue::Number(n)) => n <= max,
            (Self::Between(min, max, _), BoundedValue::Number(n)) => (min..=max).contains(&n),
            (Self::WholeSecondsBetween(min, max), BoundedValue::Number(n)) => {
                (min..=max).contains(&n) && n % 1000 == 0
            }
            (Self::MinusOneOrPositive(..), BoundedValue::Number(n)) => n == -1 || n >= 1,
            (Self::OneOf(words), BoundedValue::Text(text)) => words.contains(&text),
            (Self::Text(rule), BoundedValue::Text(text)) => rule.admits(text),
            _ => false,
        }
    }

    /// Values just outside the bound, as a config file writes them (for the tests that walk the
    /// table).
    #[cfg(test)]
    pub(super) fn just_outside(&self) -> Vec<String> {
        let numbers = |values: &[i128]| values.iter().map(i128::to_string).collect();
        match *self {
            Self::AtLeast(min, _) => numbers(&[min - 1]),
            Self::AtMost(max, _) => numbers(&[max + 1]),
            Self::Between(min, max, _) => numbers(&[min - 1, max + 1]),
            Self::WholeSecondsBetween(min, max) => {
                numbers(&[min - 1000, min + 1, max - 1, max + 1000])
            }
            Self::MinusOneOrPositive(..) => numbers(&[-2, 0]),
            Self::OneOf(words) => vec![format!("{}x", words[0]), words[0].to_uppercase()],
            Self::Text(rule) => vec![rule.examples().0.to_owned()],
        }
    }

    /// The values at the bound's edges, which it accepts (for the same tests).
    #[cfg(test)]
    pub(super) fn edges(&self) -> Vec<String> {
        let numbers = |values: &[i128]| values.iter().map(i128::to_string).collect();
        match *self {
            Self::AtLeast(min, _) => numbers(&[min]),
            Self::AtMost(max, _) => numbers(&[max]),
            Self::Between(min, max, _) | Self::WholeSecondsBetween(min, max) => {
                numbers(&[min, max])
            }
            Self::MinusOneOrPositive(..) => numbers(&[-1, 1]),
            Self::OneOf(words) => words.iter().map(|word| (*word).to_owned()).collect(),
            Self::Text(rule) => vec![rule.examples().1.to_owned()],
        }
    }
}

/// Reads after "must be": `at least 14 bytes`, `between 1 and 256`, `one of lazy, eager`.
impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::AtLeast(min, unit) => write!(f, "at least {min}{}", unit.suffix(min)),
            Self::AtMost(max, unit) => write!(f, "at most {max}{}", unit.suffix(max)),
            Self::Between(min, max, unit) => {
                write!(f, "between {min} and {max}{}", unit.suffix(max))
            }
            Self::WholeSecondsBetween(min, max) => {
                write!(f, "whole seconds between {min} and {max} ms")
            }
            Self::MinusOneOrPositive(meaning, unit) => {
                write!(f, "-1 ({meaning}) or at least 1{}", unit.suffix(1))
            }
            Self::OneOf(words) => write!(f, "one of {}", words.join(", ")),
            Self::Text(rule) => rule.fmt(f),
        }
    }
}
