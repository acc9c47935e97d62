//! What one authorization check costs with a large ACL file: builds an ACL set of
//! `ACL_COUNT` ACLs (literal topics, prefixes of several lengths, wildcards, groups) from the file
//! format, then times checks that hit a literal ACL, a prefix, and nothing at all.
//!
//! Run: `cargo run --release -p skiff-broker --example acl_check_cost`

// Example code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml's test exemptions do not reach examples.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::hint::black_box;
use std::time::Instant;

use skiff_broker::security::acl::{file, Authorizer, Operation, ResourceType};
use skiff_broker::security::session::Principal;

/// ACLs in the generated file.
const ACL_COUNT: usize = 9_000;
/// Checks timed per case.
const CHECK_COUNT: u32 = 1_000_000;

fn main() {
    let mut text = String::new();
    for index in 0..ACL_COUNT / 3 {
        text.push_str(&format!(
            "allow User:user{index} read,write topic:orders-{index}\n"
        ));
        let prefix_bytes = 3 + index % 8;
        let prefix: String = format!("team{index:08}")
            .chars()
            .take(prefix_bytes)
            .collect();
        text.push_str(&format!(
            "allow User:user{index} read topic:prefixed:{prefix}\n"
        ));
    }
    text.push_str("deny User:* write topic:audit\n");
    let acls = file::parse(&text).expect("generated file parses");
    let started = Instant::now();
    let authorizer = Authorizer::new(&acls, ["admin".to_owned()], false);
    println!(
        "{} ACLs indexed in {:.1} ms",
        authorizer.acl_count(),
        started.elapsed().as_secs_f64() * 1e3
    );
    let principal = Principal::user("user42");
    let cases = [
        ("literal hit", "orders-42"),
        ("prefix hit", "team0000042-payments"),
        ("no ACL", "unrelated-topic-name"),
    ];
    for (label, topic) in cases {
        let started = Instant::now();
        let mut allowed = 0u32;
        for _ in 0..CHECK_COUNT {
            allowed += u32::from(authorizer.authorize(
                black_box(&principal),
                Operation::Describe,
                ResourceType::Topic,
                black_box(topic),
            ));
        }
        let per_check_ns = started.elapsed().as_nanos() as f64 / f64::from(CHECK_COUNT);
        println!("{label:>12}: {per_check_ns:.0} ns per check (allowed {allowed})");
    }
}
