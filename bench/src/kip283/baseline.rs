//! The machine's limit for the same bytes: a plain TCP socket pair on 127.0.0.1, a sender thread
//! writing response-sized blocks from memory and a receiver reading them into one reusable buffer
//! in the consumer's read pieces, with no protocol at all. Every broker figure is also given as a
//! fraction of this.
//!
//! [`run_sendfile`] is the same from a file with `sendfile`, as a broker serves modern fetches:
//! the receiver then copies page-cache pages nobody touched since they were written (a file larger
//! than the caches), where [`run`]'s receiver copies bytes the sender has just copied into the
//! socket (hot in cache). It is the limit for serving stored bytes.
//!
//! With [`Pace::Turns`] the `sendfile` baseline also takes turns as a Kafka consumer does with one
//! Fetch in flight: the receiver writes a small request, the sender waits for it before each
//! block, and the next request goes out only once the whole block is read. That is the limit of
//! any broker answering one fetch at a time per connection with these response sizes.
//!
//! Must never: bind anything but 127.0.0.1, or move more than the `total_bytes` asked for.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::client::READ_PIECE_BYTES_MAX;

/// One baseline transfer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineOutcome {
    /// Bytes received.
    pub bytes: u64,
    /// Wall time at the receiver, first byte asked to last byte read.
    pub seconds: f64,
}

impl BaselineOutcome {
    /// Bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// Sends `total_bytes` in blocks of `block_bytes` through a fresh loopback connection.
pub fn run(total_bytes: u64, block_bytes: usize) -> anyhow::Result<BaselineOutcome> {
    let block_bytes = block_bytes.max(1);
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let blocks = total_bytes.div_ceil(block_bytes as u64);
    let sender = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut stream, _) = listener.accept()?;
        let block = vec![0x5au8; block_bytes];
        for _ in 0..blocks {
            stream.write_all(&block)?;
        }
        Ok(())
    });
    receive(address, blocks, block_bytes, Pace::Stream, sender)
}

/// How the sender and the receiver share a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// The sender streams blocks back to back.
    Stream,
    /// The sender sends a block only after the receiver asked for it with a
    /// [`TURN_REQUEST_BYTES`] request, once the previous block was wholly read.
    Turns,
}

/// Size of a turn's request: about a Fetch request for 12 partitions of one topic.
pub const TURN_REQUEST_BYTES: usize = 128;

/// Longest either side waits for the other's next byte: a side that stopped turns into an error,
/// not a hang.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `total_bytes` in blocks of `block_bytes` with `sendfile` from a file of `file_bytes`
/// (written first, so it is in the page cache as a broker's recent segments are), cycling through
/// it, through a fresh loopback connection, at `pace`.
pub fn run_sendfile(
    total_bytes: u64,
    block_bytes: usize,
    file_bytes: u64,
    pace: Pace,
) -> anyhow::Result<BaselineOutcome> {
    let block_bytes = block_bytes.max(1);
    let blocks_in_file = (file_bytes / block_bytes as u64).max(1);
    let mut file = tempfile::tempfile()?;
    let block = vec![0x5au8; block_bytes];
    for _ in 0..blocks_in_file {
        file.write_all(&block)?;
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let blocks = total_bytes.div_ceil(block_bytes as u64);
    let sender = std::thread::spawn(move || -> anyhow::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(STALL_TIMEOUT))?;
        let mut request = [0u8; TURN_REQUEST_BYTES];
        for index in 0..blocks {
            if pace == Pace::Turns {
                stream.read_exact(&mut request)?;
            }
            let mut offset = libc::off_t::try_from((index % blocks_in_file) * block_bytes as u64)?;
            let mut left = block_bytes;
            while left > 0 {
                // SAFETY: both descriptors are open for the call (owned by `file` and `stream`),
                // and `offset` is a valid off_t the call advances.
                let sent = unsafe {
                    libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, left)
                };
                if sent < 0 {
                    return Err(std::io::Error::last_os_error().into());
                }
                anyhow::ensure!(sent > 0, "sendfile sent nothing");
                left -= usize::try_from(sent)?;
            }
        }
        Ok(())
    });
    receive(address, blocks, block_bytes, pace, sender)
}

/// The receiving side of both baselines: reads `blocks` blocks as the consumer reads them, asking
/// for each first at [`Pace::Turns`].
fn receive(
    address: std::net::SocketAddr,
    blocks: u64,
    block_bytes: usize,
    pace: Pace,
    sender: std::thread::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<BaselineOutcome> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(STALL_TIMEOUT))?;
    let mut buffer = vec![0u8; block_bytes];
    // Fault the buffer in before timing, as a consumer's reused buffer would be.
    buffer.fill(1);
    let request = [0u8; TURN_REQUEST_BYTES];
    let started = Instant::now();
    for _ in 0..blocks {
        if pace == Pace::Turns {
            stream.write_all(&request)?;
        }
        // Read as the consumer reads (see READ_PIECE_BYTES_MAX), so the two compare like for like.
        for piece in buffer.chunks_mut(READ_PIECE_BYTES_MAX) {
            stream.read_exact(piece)?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("baseline sender panicked"))?
        .context("baseline sender")?;
    Ok(BaselineOutcome {
        bytes: blocks * block_bytes as u64,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_whole_blocks() {
        let outcome = run(1000, 300).unwrap();
        assert_eq!(outcome.bytes, 1200);
    }

    #[test]
    fn sendfile_moves_whole_blocks_cycling_through_the_file() {
        let outcome = run_sendfile(3000, 300, 900, Pace::Stream).unwrap();
        assert_eq!(outcome.bytes, 3000);
    }

    #[test]
    fn turns_move_every_block_each_after_its_request() {
        // The sender reads one request per block: a receiver that skipped one would leave both
        // waiting until the stall timeout fails the run.
        let outcome = run_sendfile(3000, 300, 900, Pace::Turns).unwrap();
        assert_eq!(outcome.bytes, 3000);
    }
}
