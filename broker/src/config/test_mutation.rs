//! `skiff.test.mutation`: a deliberate broker bug that a test harness turns on to show that its
//! checker catches it (tests/jepsen: acks=all answered before the high watermark passes the batch
//! must count lost writes). This module, the key and the config field exist only in builds with the
//! cargo feature `test-mutations`; without it the config refuses the key as unknown, like a typo,
//! and [`Config::acks_all_waits_for_high_watermark`](super::Config::acks_all_waits_for_high_watermark)
//! is the constant `true`.
//!
//! Must never: be compiled without the feature, or hold a mutation that is on by default.

use super::{invalid, ConfigError, FromConfigValue};

/// The key; known only with the feature.
pub const KEY: &str = "skiff.test.mutation";

/// A broker bug the harness may turn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestMutation {
    /// `ack-before-hw`: an acks=all Produce is answered as soon as the leader appended it, without
    /// waiting for the high watermark to pass it (acks=all behaves as acks=1), so a leader that dies
    /// before its followers fetched loses acknowledged records.
    AckBeforeHw,
}

impl FromConfigValue for TestMutation {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        match String::from_value(key, value)?.as_str() {
            "ack-before-hw" => Ok(Self::AckBeforeHw),
            other => Err(invalid(
                key,
                format!("expected ack-before-hw, got '{other}'"),
            )),
        }
    }
}
