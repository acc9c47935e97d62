//! The machine's limit for the same bytes: a plain TCP socket pair on 127.0.0.1, a sender thread
//! writing response-sized blocks from memory and a receiver reading them into one reusable buffer
//! in the consumer's read pieces, with no protocol at all. Every broker figure is also given as a
//! fraction of this.
//!
//! Must never: bind anything but 127.0.0.1, or move more than the `total_bytes` asked for.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

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
    let mut stream = TcpStream::connect(address)?;
    stream.set_nodelay(true)?;
    let mut buffer = vec![0u8; block_bytes];
    // Fault the buffer in before timing, as a consumer's reused buffer would be.
    buffer.fill(1);
    let started = Instant::now();
    for _ in 0..blocks {
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
        assert!(outcome.seconds >= 0.0);
    }
}
