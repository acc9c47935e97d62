//! Fills placement's [`LoadReport`] from this broker's own process and disk statistics on Linux.
//!
//! Owns reading `/proc/self/stat`, `/proc/stat`, `/proc/diskstats`, `/proc/self/io` and
//! `statvfs(2)` for the data directory, and the parsing of their text (pure functions, tested on
//! sample text). The smoothing lives in the pure [`LoadWindow`]; this file only turns the
//! machine's counters into a [`RawLoadSample`]. It never reads the clock: the driver passes
//! `now_ms`. On other systems, or where a file is unreadable, the figures stay unknown (−1).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use skiff_placement::load::{LoadReport, LoadWindow, RawLoadSample};

/// CPU ticks (user + system) of a process from the text of `/proc/<pid>/stat`.
///
/// The command name (field 2) is in parentheses and may itself hold spaces or parentheses, so
/// the fields are counted from the *last* `)`: after it come state (field 3) … utime (14),
/// stime (15).
pub fn parse_process_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Total CPU ticks of the machine (all CPUs, all states) from the text of `/proc/stat`: the sum
/// of the aggregate `cpu` line. Guest time is already counted in user time, so it is left out.
pub fn parse_machine_cpu_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Milliseconds spent doing IO (`io_ticks`, the 13th column) of the device `major:minor` from
/// the text of `/proc/diskstats`.
pub fn parse_disk_io_ticks(diskstats: &str, major: u32, minor: u32) -> Option<u64> {
    diskstats.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (maj, min) = (
            fields.first()?.parse::<u32>().ok()?,
            fields.get(1)?.parse::<u32>().ok()?,
        );
        if (maj, min) != (major, minor) {
            return None;
        }
        fields.get(12)?.parse().ok()
    })
}

/// Bytes this process caused to be written to storage (`write_bytes:` of `/proc/self/io`).
pub fn parse_write_bytes(io: &str) -> Option<u64> {
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:")?.trim().parse().ok())
}

/// Splits a Linux `dev_t` into (major, minor), as glibc's `gnu_dev_major/minor` do.
pub fn split_dev(dev: u64) -> (u32, u32) {
    // Masked to 32 bits as glibc's are (the conversions cannot fail).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (
        u32::try_from(major).unwrap_or(u32::MAX),
        u32::try_from(minor).unwrap_or(u32::MAX),
    )
}

/// Samples this broker's load and smooths it over a [`LoadWindow`].
#[derive(Debug)]
pub struct LoadSampler {
    data_dir: PathBuf,
    window: LoadWindow,
}

impl LoadSampler {
    /// A sampler for the disk holding `data_dir`, smoothing over `window_samples` intervals.
    pub fn new(data_dir: impl Into<PathBuf>, window_samples: usize) -> Self {
        Self {
            data_dir: data_dir.into(),
            window: LoadWindow::new(window_samples),
        }
    }

    /// Reads the counters now. `write_bytes_total` is the broker's own count of bytes appended
    /// to logs; `None` falls back to the process's `write_bytes` from `/proc/self/io`.
    pub fn read_raw(&self, now_ms: u64, write_bytes_total: Option<u64>) -> RawLoadSample {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let io_ticks = std::fs::metadata(&self.data_dir).ok().and_then(|m| {
            let (major, minor) = split_dev(m.dev());
            parse_disk_io_ticks(&read("/proc/diskstats")?, major, minor)
        });
        let (disk_free_bytes, disk_total_bytes) = disk_space(&self.data_dir).unzip();
        RawLoadSample {
            now_ms,
            journal_io_ticks_ms: io_ticks,
            log_io_ticks_ms: io_ticks,
            process_cpu_ticks: read("/proc/self/stat")
                .as_deref()
                .and_then(parse_process_cpu_ticks),
            machine_cpu_ticks: read("/proc/stat")
                .as_deref()
                .and_then(parse_machine_cpu_ticks),
            write_bytes_total: write_bytes_total
                .or_else(|| read("/proc/self/io").as_deref().and_then(parse_write_bytes)),
            disk_free_bytes,
            disk_total_bytes,
        }
    }

    /// Reads the counters and returns the smoothed report once the window is full.
    pub fn sample(&mut self, now_ms: u64, write_bytes_total: Option<u64>) -> Option<LoadReport> {
        let raw = self.read_raw(now_ms, write_bytes_total);
        self.window.push(raw)
    }
}

/// (free, total) bytes of the file system holding `path`, from `statvfs(2)`.
pub fn disk_space(path: &Path) -> Option<(u64, u64)> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stats` points to writable memory
    // of the right type; statvfs only writes into it, and we read it only on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let stats = unsafe { stats.assume_init() };
    // The field types differ between platforms (u32 on some 32-bit targets), hence the casts.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let (block, available, blocks) = (
        stats.f_frsize as u64,
        stats.f_bavail as u64,
        stats.f_blocks as u64,
    );
    Some((
        available.saturating_mul(block),
        blocks.saturating_mul(block),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROC_SELF_STAT: &str = "8124 (my (odd) name) R 8122 8122 2142 0 -1 4194304 102 0 0 0 \
        250 30 0 0 20 0 1 0 54552 3133440 381 18446744073709551615";
    const PROC_STAT: &str = "cpu  23478 0 5657 78596 575 0 141 334 0 0\n\
        cpu0 10853 0 2516 40666 134 0 40 160 0 0\nintr 1 2 3\n";
    const DISKSTATS: &str = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n \
        254       0 vda 9514 2781 906406 4096 91577 86045 3338826 103823 0 85436 108917 0 0 0 0\n \
        254       1 vda1 9000 2781 900000 4000 91000 86045 3338000 103000 0 85000 108000\n";

    #[test]
    fn parses_sample_text() {
        assert_eq!(parse_process_cpu_ticks(PROC_SELF_STAT), Some(280));
        assert_eq!(parse_process_cpu_ticks("garbage"), None);
        assert_eq!(
            parse_machine_cpu_ticks(PROC_STAT),
            Some(23478 + 5657 + 78596 + 575 + 141 + 334)
        );
        assert_eq!(parse_machine_cpu_ticks("intr 1"), None);
        assert_eq!(parse_disk_io_ticks(DISKSTATS, 254, 0), Some(85436));
        assert_eq!(parse_disk_io_ticks(DISKSTATS, 254, 1), Some(85000));
        assert_eq!(parse_disk_io_ticks(DISKSTATS, 8, 0), None);
        assert_eq!(
            parse_write_bytes("rchar: 1\nwrite_bytes: 4096\n"),
            Some(4096)
        );
        assert_eq!(parse_write_bytes("rchar: 1\n"), None);
        assert_eq!(split_dev(0xfe00), (254, 0));
        assert_eq!(split_dev(0x0801), (8, 1));
    }

    /// One real sample on this machine: the counters that every Linux host has must be read.
    #[test]
    fn real_sample_on_this_machine() {
        let dir = std::env::temp_dir();
        let mut sampler = LoadSampler::new(&dir, 1);
        let raw = sampler.read_raw(1, Some(0));
        assert!(raw.process_cpu_ticks.is_some(), "{raw:?}");
        assert!(raw.machine_cpu_ticks.is_some(), "{raw:?}");
        let (free, total) = (raw.disk_free_bytes.unwrap(), raw.disk_total_bytes.unwrap());
        assert!(total > 0 && free <= total, "{raw:?}");
        assert_eq!(sampler.sample(1_000, Some(0)), None);
        // The tick counters move in 10 ms steps: wait (bounded) until the machine's has moved,
        // so the CPU share is computable. This waits for a counter, it does not time anything.
        let read_ticks = || {
            let stat = std::fs::read_to_string("/proc/stat").ok();
            stat.as_deref().and_then(parse_machine_cpu_ticks)
        };
        let start = read_ticks().unwrap();
        for _ in 0..1_000_000 {
            if read_ticks() > Some(start + 1) {
                break;
            }
        }
        let report = sampler.sample(2_000, Some(500)).unwrap();
        assert_eq!(report.write_bytes_per_second, 500.0);
        assert!((0.0..=100.0).contains(&report.cpu_used_pct), "{report:?}");
        // IO utilisation is known only if the data dir sits on a block device listed in
        // diskstats (not on overlay or tmpfs); either way it is a percentage or unknown.
        let util = report.journal_io_util_pct;
        assert!(util == -1.0 || (0.0..=100.0).contains(&util), "{report:?}");
    }
}
