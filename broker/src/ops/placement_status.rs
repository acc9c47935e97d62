//! `skiff placement status`: asks a broker's metrics listener for `GET /placement/bundles` and
//! prints the cluster's bundles (owner, state, load, last move) and, from the controller, the
//! brokers' load as the shedder scored it and its last plan, as plain-text tables.
//!
//! Must never: change anything (it only reads the endpoint).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// How long the command waits for the broker to connect and answer.
pub const STATUS_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (a bundle is about 400 bytes of JSON; 128 per namespace at most).
pub const STATUS_RESPONSE_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Fetches the bundle map from the metrics listener at `address` and renders it.
pub fn fetch_and_render(address: SocketAddr) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect_timeout(&address, STATUS_TIMEOUT)?;
    stream.set_read_timeout(Some(STATUS_TIMEOUT))?;
    write!(
        stream,
        "GET /placement/bundles HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream
        .take(STATUS_RESPONSE_BYTES_MAX)
        .read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("{address} sent no HTTP answer"))?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200"),
        "{address} answered {}",
        head.lines().next().unwrap_or_default()
    );
    render(&serde_json::from_str(body)?)
}

/// The value at a JSON pointer (`/a/b`), null where there is none (as indexing gives).
fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value.pointer(pointer).unwrap_or(&Value::Null)
}

fn rate(value: &Value) -> String {
    let bytes = value.as_f64().unwrap_or(0.0);
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MiB/s", bytes / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB/s", bytes / 1024.0)
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The tables for the endpoint's JSON answer.
pub fn render(view: &Value) -> anyhow::Result<String> {
    let bundles = view["bundles"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("the answer has no bundle list"))?;
    let mut out = String::new();
    writeln!(
        out,
        "{:<48} {:>5} {:<10} {:>6} {:>12} {:>9} LAST MOVE",
        "BUNDLE", "OWNER", "STATE", "TARGET", "LOAD", "LED/PARTS"
    )?;
    for b in bundles {
        let last = match &b["last_move"] {
            Value::Null => "-".to_owned(),
            m => format!(
                "{} -> {} at {}",
                text(&m["from"]),
                text(&m["to"]),
                text(&m["finished_ms"])
            ),
        };
        writeln!(
            out,
            "{:<48} {:>5} {:<10} {:>6} {:>12} {:>9} {}",
            text(&b["name"]),
            text(&b["owner"]),
            text(&b["state"]),
            text(&b["target"]),
            rate(at(b, "/load/throughput_bytes_per_second")),
            format!(
                "{}/{}",
                text(&b["partitions_led_by_owner"]),
                text(&b["partitions"])
            ),
            last
        )?;
    }
    match &view["cycle"] {
        Value::Null => writeln!(
            out,
            "\n(no shedding cycle here: ask the controller, broker {})",
            text(&view["controller"])
        )?,
        cycle => {
            writeln!(
                out,
                "\nLast shedding cycle at {} ms, shedder {}{}",
                text(&cycle["at_ms"]),
                text(&cycle["shedder"]),
                if cycle["dry_run"].as_bool() == Some(true) {
                    " (dry run)"
                } else {
                    ""
                }
            )?;
            writeln!(
                out,
                "{:>6} {:>12} {:>8} {:>8}",
                "BROKER", "LOAD", "SCORE", "BUNDLES"
            )?;
            for b in cycle["brokers"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "{:>6} {:>12} {:>7.1}% {:>8}",
                    text(&b["broker"]),
                    rate(&b["load_bytes_per_second"]),
                    b["score_pct"].as_f64().unwrap_or(0.0),
                    text(&b["bundles"])
                )?;
            }
            let moves = cycle["moves"].as_array().map_or(&[][..], Vec::as_slice);
            if moves.is_empty() {
                writeln!(out, "No move planned.")?;
            }
            for m in moves {
                writeln!(
                    out,
                    "move {} {} -> {}: {}",
                    text(&m["bundle"]),
                    text(&m["from"]),
                    text(&m["to"]),
                    text(&m["outcome"])
                )?;
            }
            for s in cycle["splits"].as_array().into_iter().flatten() {
                writeln!(out, "split {}", text(s))?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_show_owners_moves_and_the_cycle() {
        let view = serde_json::json!({
            "bundles": [{
                "name": "t/0x00000000_0x40000000", "namespace": "t", "hash_lo": 0,
                "hash_hi": 1073741824u64, "owner": 2, "state": "assigning", "target": 3,
                "since_ms": 5, "reason": "r",
                "load": {"msg_rate_per_second": 10.0, "throughput_bytes_per_second": 2097152.0},
                "partitions": 3, "partitions_led_by_owner": 2,
                "last_move": {"from": 1, "to": 2, "started_ms": 1, "finished_ms": 4}
            }],
            "cycle": {"at_ms": 9, "shedder": "skiff", "dry_run": true,
                      "brokers": [{"broker": 2, "load_bytes_per_second": 2097152.0,
                                   "score_pct": 81.25, "bundles": 1}],
                      "moves": [{"bundle": "t/0x00000000_0x40000000", "from": 2, "to": 3,
                                 "reason": "x", "outcome": "dry run"}],
                      "splits": []},
            "controller": 2
        });
        let out = render(&view).unwrap();
        assert!(out.contains("t/0x00000000_0x40000000"), "{out}");
        assert!(out.contains("assigning"), "{out}");
        assert!(out.contains("2.0 MiB/s"), "{out}");
        assert!(out.contains("2/3"), "{out}");
        assert!(out.contains("1 -> 2 at 4"), "{out}");
        assert!(out.contains("(dry run)"), "{out}");
        assert!(out.contains("81.2%") || out.contains("81.3%"), "{out}");
        assert!(
            out.contains("move t/0x00000000_0x40000000 2 -> 3: dry run"),
            "{out}"
        );
        let elsewhere = serde_json::json!({"bundles": [], "cycle": null, "controller": 4});
        assert!(render(&elsewhere)
            .unwrap()
            .contains("ask the controller, broker 4"));
        assert!(render(&serde_json::json!({})).is_err());
    }
}
