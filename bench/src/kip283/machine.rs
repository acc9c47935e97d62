//! What the figures were measured on: cores, CPU model, memory and the load while measuring (the
//! machine is shared, so the load goes into every report).
//!
//! Must never: fail a run (a field it cannot read is reported as unknown).

use serde::{Deserialize, Serialize};

/// The machine and its load at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs this process may use.
    pub cpu_count: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// MemTotal from /proc/meminfo.
    pub memory_bytes: u64,
    /// The 1-minute load average from /proc/loadavg.
    pub load_average_1m: f64,
}

impl Machine {
    /// Reads the figures now.
    pub fn now() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        Self {
            cpu_count: std::thread::available_parallelism().map_or(0, |count| count.get()),
            cpu_model: parse_cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".to_owned()),
            memory_bytes: parse_mem_total_bytes(&meminfo).unwrap_or(0),
            load_average_1m: loadavg
                .split_whitespace()
                .next()
                .and_then(|field| field.parse().ok())
                .unwrap_or(f64::NAN),
        }
    }
}

fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    let line = cpuinfo
        .lines()
        .find(|line| line.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_owned())
}

fn parse_mem_total_bytes(meminfo: &str) -> Option<u64> {
    super::rss::proc_kib_field_bytes(meminfo, "MemTotal:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_model_and_memory() {
        assert_eq!(
            parse_cpu_model("processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\n").as_deref(),
            Some("Some CPU @ 2.0GHz")
        );
        assert_eq!(
            parse_mem_total_bytes("MemTotal:       2048 kB\n"),
            Some(2048 * 1024)
        );
        assert_eq!(parse_mem_total_bytes(""), None);
    }
}

/// Seconds since the Unix epoch now (for the report's date).
pub fn unix_seconds_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// `YYYY-MM-DD HH:MM UTC` for `unix_seconds` (civil-from-days on the proleptic Gregorian
/// calendar, so the report needs no date crate).
pub fn format_utc(unix_seconds: u64) -> String {
    let days = i64::try_from(unix_seconds / 86_400).unwrap_or(0);
    let second_of_day = unix_seconds % 86_400;
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        second_of_day / 3600,
        second_of_day % 3600 / 60
    )
}

#[cfg(test)]
mod date_tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13 UTC");
    }
}
