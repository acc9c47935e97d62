//! The broker's resident memory, read from `/proc/<pid>/status` (VmRSS now, VmHWM the peak, and
//! VmRSS split into RssAnon and RssFile), and a sampler that records it over time and raises a flag
//! when it passes a cap.
//!
//! RssAnon is the memory the broker owns (heap, stacks, allocator arenas); RssFile is page-cache
//! pages of mapped files that happen to be resident in its address space (the storage's mapped
//! segment views and indexes, the binary): the kernel can drop those under pressure, and they grow
//! with what was read, not with what is held. A per-response memory bound is about RssAnon.
//!
//! Must never: read any other file, or keep more than [`SAMPLES_MAX`] samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Samples kept by one sampler (at 100 ms, ten minutes).
pub const SAMPLES_MAX: usize = 6000;

/// Memory figures of one process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// VmRSS: resident now.
    pub rss_bytes: u64,
    /// VmHWM: the highest resident size since the process started.
    pub hwm_bytes: u64,
    /// RssAnon: the anonymous part of VmRSS (0 on kernels before 4.5, which do not split it).
    pub anon_bytes: u64,
    /// RssFile: the file-backed part of VmRSS (0 on kernels before 4.5).
    pub file_bytes: u64,
}

/// Parses VmRSS, VmHWM, RssAnon and RssFile (given in kB) out of the text of `/proc/<pid>/status`.
pub fn parse_status(text: &str) -> Option<Memory> {
    Some(Memory {
        rss_bytes: proc_kib_field_bytes(text, "VmRSS:")?,
        hwm_bytes: proc_kib_field_bytes(text, "VmHWM:")?,
        anon_bytes: proc_kib_field_bytes(text, "RssAnon:").unwrap_or(0),
        file_bytes: proc_kib_field_bytes(text, "RssFile:").unwrap_or(0),
    })
}

/// The bytes of the first `<name> <n> kB` line of a `/proc` text (`status`, `meminfo`).
pub(crate) fn proc_kib_field_bytes(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Reads the figures of process `pid`.
pub fn read(pid: u32) -> anyhow::Result<Memory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    parse_status(&text).context("no VmRSS/VmHWM in /proc status")
}

/// One point of an RSS time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Since the sampler started.
    pub at_ms: u64,
    /// VmRSS then.
    pub rss_bytes: u64,
    /// RssAnon then (absent, 0, in records written before it was sampled).
    #[serde(default)]
    pub anon_bytes: u64,
    /// RssFile then (absent, 0, in older records).
    #[serde(default)]
    pub file_bytes: u64,
}

/// A background sampler of one process.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    capped: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Samples `pid` every `interval`; sets [`Sampler::capped`] once VmRSS passes `cap_bytes`, and
    /// with `kill_at_cap` (only for a child this tool spawned) kills the process at once, since a
    /// broker converting whole responses keeps growing after its clients hang up.
    pub fn start(pid: u32, interval: Duration, cap_bytes: u64, kill_at_cap: bool) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let capped = Arc::new(AtomicBool::new(false));
        let task = {
            let stop = stop.clone();
            let capped = capped.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut samples = Vec::new();
                while !stop.load(Ordering::Relaxed) && samples.len() < SAMPLES_MAX {
                    let Ok(memory) = read(pid) else { break };
                    if memory.rss_bytes > cap_bytes
                        && !capped.swap(true, Ordering::Relaxed)
                        && kill_at_cap
                    {
                        if let Ok(pid) = libc::pid_t::try_from(pid) {
                            // SAFETY: kill(2) on our own, not yet reaped child.
                            unsafe {
                                libc::kill(pid, libc::SIGKILL);
                            }
                        }
                    }
                    samples.push(Sample {
                        at_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        rss_bytes: memory.rss_bytes,
                        anon_bytes: memory.anon_bytes,
                        file_bytes: memory.file_bytes,
                    });
                    tokio::time::sleep(interval).await;
                }
                samples
            })
        };
        Self { stop, capped, task }
    }

    /// Whether VmRSS has passed the cap.
    pub fn capped(&self) -> bool {
        self.capped.load(Ordering::Relaxed)
    }

    /// A flag shared with workers that must stop at the cap.
    pub fn capped_flag(&self) -> Arc<AtomicBool> {
        self.capped.clone()
    }

    /// Stops and returns the series.
    pub async fn finish(self) -> anyhow::Result<Vec<Sample>> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(self.task.await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status_fields() {
        let text = "Name:\tskiff\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n\
                    RssAnon:\t     768 kB\nRssFile:\t     256 kB\nRssShmem:\t       0 kB\n";
        assert_eq!(
            parse_status(text),
            Some(Memory {
                rss_bytes: 1024 * 1024,
                hwm_bytes: 2048 * 1024,
                anon_bytes: 768 * 1024,
                file_bytes: 256 * 1024,
            })
        );
        let old_kernel = "VmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(
            parse_status(old_kernel).map(|memory| memory.anon_bytes),
            Some(0)
        );
        assert_eq!(parse_status("Name:\tkernel-thread\n"), None);
    }

    #[test]
    fn reads_this_process() {
        let memory = read(std::process::id()).unwrap();
        assert!(memory.rss_bytes > 0 && memory.hwm_bytes >= memory.rss_bytes);
        assert!(memory.anon_bytes + memory.file_bytes <= memory.rss_bytes);
        assert!(memory.anon_bytes > 0, "Linux ≥ 4.5 splits VmRSS");
    }
}
