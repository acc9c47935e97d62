//! The aborted-transaction index of one segment, `<base>.txnindex` (Kafka's `TransactionIndex`):
//! one 34-byte entry per ABORT marker the segment holds, in offset order, each Kafka's layout
//! (version int16 `0`, producer id, first offset, last offset, last stable offset, big-endian).
//! Owns the entry codec both ways (pure code over bytes), the file's append, ranged read and
//! truncation through [`FileIo`] (so the power-loss simulation sees it), and the checks of its
//! entries; the log decides when entries are written, synced, cut or dropped, and which of them
//! a recovery keeps (`log::load`).
//!
//! Why no descriptor is held and no mapping made: entries are rare (one per aborted
//! transaction, usually none in a segment), so the file is created only at a segment's first
//! entry and opened per use; a segment without one costs nothing here.
//!
//! Must never: accept an entry out of order (each `last_offset` above the one before) or outside
//! its segment, panic on any bytes, or read more than the caller's bound of entries.

use std::path::{Path, PathBuf};

use skiff_protocol::records::txn::AbortedTxn;

use crate::config::PersistMode;
use crate::error::{Error, Result};
use crate::io::{FileIo, OpenMode};

/// Bytes of one entry: version (2), producer id (8), first offset (8), last offset (8), last
/// stable offset (8).
pub(crate) const TXN_ENTRY_BYTES: usize = 34;
/// The only entry version Kafka writes.
const TXN_ENTRY_VERSION: i16 = 0;
/// Entries read from the file per `pread` (64 KiB worth): a segment with many aborted
/// transactions is read in steps, never whole into memory.
const TXN_READ_CHUNK_ENTRIES: usize = 1927;

/// Kafka's bytes of `entry`.
pub(crate) fn encode(entry: &AbortedTxn) -> [u8; TXN_ENTRY_BYTES] {
    let mut bytes = [0u8; TXN_ENTRY_BYTES];
    let fields = [
        entry.producer_id,
        entry.first_offset,
        entry.last_offset,
        entry.last_stable_offset,
    ];
    bytes[..2].copy_from_slice(&TXN_ENTRY_VERSION.to_be_bytes());
    for (slot, field) in bytes[2..].chunks_exact_mut(8).zip(fields) {
        slot.copy_from_slice(&field.to_be_bytes());
    }
    bytes
}

/// The entry in `bytes` (exactly [`TXN_ENTRY_BYTES`]), or why it is not one: an unknown
/// version, a negative offset, or a first offset past the last.
pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<AbortedTxn, &'static str> {
    if bytes.len() != TXN_ENTRY_BYTES {
        return Err("an aborted-transaction entry is not 34 bytes");
    }
    let word = |at: usize| {
        let mut field = [0u8; 8];
        field.copy_from_slice(bytes.get(at..at + 8).unwrap_or(&[0; 8]));
        i64::from_be_bytes(field)
    };
    let version = bytes.get(..2).and_then(|v| <[u8; 2]>::try_from(v).ok());
    if version.map(i16::from_be_bytes) != Some(TXN_ENTRY_VERSION) {
        return Err("unknown aborted-transaction entry version");
    }
    let entry = AbortedTxn {
        producer_id: word(2),
        first_offset: word(10),
        last_offset: word(18),
        last_stable_offset: word(26),
    };
    if entry.first_offset < 0 || entry.last_stable_offset < 0 {
        return Err("an aborted-transaction entry holds a negative offset");
    }
    if entry.first_offset > entry.last_offset {
        return Err("an aborted transaction's first offset is past its marker");
    }
    Ok(entry)
}

/// Whether `entry` may follow `previous` (the index's last entry, if any) in a segment whose
/// base offset is `base_offset`: its marker lies in the segment, after the one before.
pub(crate) fn check_order(
    base_offset: i64,
    previous: Option<&AbortedTxn>,
    entry: &AbortedTxn,
) -> std::result::Result<(), &'static str> {
    if entry.last_offset < base_offset {
        return Err("an aborted transaction's marker lies below its segment");
    }
    if previous.is_some_and(|previous| entry.last_offset <= previous.last_offset) {
        return Err("aborted-transaction entries are not in marker order");
    }
    Ok(())
}

/// One segment's `.txnindex`: where it is, how many whole entries it holds and the last one.
#[derive(Debug)]
pub(crate) struct TxnIndex {
    path: PathBuf,
    base_offset: i64,
    /// Whole entries in the file (the file may not exist when this is 0).
    entries: u64,
    /// The last entry, if any (the order check of the next append).
    last: Option<AbortedTxn>,
}

impl TxnIndex {
    /// The index of the segment at `base_offset` whose `.txnindex` is at `path`, known to hold
    /// no entry (the file is absent or empty; created at the first append).
    pub(crate) fn empty(path: PathBuf, base_offset: i64) -> Self {
        Self {
            path,
            base_offset,
            entries: 0,
            last: None,
        }
    }

    /// Path of the file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the index holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes of the entries.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.entries * TXN_ENTRY_BYTES as u64
    }

    /// The last entry, if any.
    pub(crate) fn last(&self) -> Option<&AbortedTxn> {
        self.last.as_ref()
    }

    /// Appends `entry` (checked against the last one: [`check_order`]); not yet durable (the
    /// file's name is, when this creates it).
    pub(crate) fn append(&mut self, io: &dyn FileIo, entry: &AbortedTxn) -> Result<()> {
        check_order(self.base_offset, self.last.as_ref(), entry)
            .map_err(|reason| Error::InvalidTxnEntry(reason.to_owned()))?;
        let file = io
            .open(&self.path, OpenMode::CreateKeep)
            .map_err(|error| Error::io(&self.path, error))?;
        io.write_all_at(&file, &encode(entry), self.size_bytes())
            .map_err(|error| Error::io(&self.path, error))?;
        if self.entries == 0 {
            // A new file's name must be durable before its entries can be (a flush syncs the
            // file, not the directory): once per segment with aborted transactions.
            crate::fs::sync_parent(io, &self.path)?;
        }
        self.entries += 1;
        self.last = Some(*entry);
        Ok(())
    }

    /// Calls `visit` with each entry in order until it answers `false`; reads at most
    /// [`TXN_READ_CHUNK_ENTRIES`] entries at a time. An entry that does not decode is
    /// [`Error::Corrupt`] naming the file and its position.
    pub(crate) fn for_each(
        &self,
        io: &dyn FileIo,
        mut visit: impl FnMut(AbortedTxn) -> Result<bool>,
    ) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let file = io
            .open(&self.path, OpenMode::ReadWrite)
            .map_err(|error| Error::io(&self.path, error))?;
        let mut buffer = vec![0u8; TXN_READ_CHUNK_ENTRIES * TXN_ENTRY_BYTES];
        let mut done = 0u64;
        while done < self.entries {
            let count = usize::try_from(self.entries - done)
                .unwrap_or(usize::MAX)
                .min(TXN_READ_CHUNK_ENTRIES);
            let chunk = buffer
                .get_mut(..count * TXN_ENTRY_BYTES)
                .unwrap_or_default();
            let position = done * TXN_ENTRY_BYTES as u64;
            io.read_exact_at(&file, chunk, position)
                .map_err(|error| Error::io(&self.path, error))?;
            for (index, bytes) in chunk.chunks_exact(TXN_ENTRY_BYTES).enumerate() {
                let entry = decode(bytes).map_err(|reason| {
                    Error::corrupt(
                        &self.path,
                        position + (index * TXN_ENTRY_BYTES) as u64,
                        reason,
                    )
                })?;
                if !visit(entry)? {
                    return Ok(());
                }
            }
            done += count as u64;
        }
        Ok(())
    }

    /// Keeps the first `entries` entries (their last one is `last`) and cuts the rest, durably
    /// (`fdatasync`); with none kept the file is removed.
    pub(crate) fn truncate_to_entries(
        &mut self,
        io: &dyn FileIo,
        entries: u64,
        last: Option<AbortedTxn>,
    ) -> Result<()> {
        debug_assert!(entries <= self.entries || self.entries == 0);
        if entries == 0 {
            remove_if_present(io, &self.path)?;
        } else {
            let file = io
                .open(&self.path, OpenMode::ReadWrite)
                .map_err(|error| Error::io(&self.path, error))?;
            io.set_len(&file, entries * TXN_ENTRY_BYTES as u64)
                .map_err(|error| Error::io(&self.path, error))?;
            io.sync(&file, PersistMode::SyncData)
                .map_err(|error| Error::io(&self.path, error))?;
        }
        self.entries = entries;
        self.last = last;
        Ok(())
    }

    /// Drops every entry whose marker is at or past `end_offset` (a truncated log), durably.
    pub(crate) fn truncate_from(&mut self, io: &dyn FileIo, end_offset: i64) -> Result<()> {
        if self.last.is_none_or(|last| last.last_offset < end_offset) {
            return Ok(());
        }
        let mut kept = 0u64;
        let mut last = None;
        self.for_each(io, |entry| {
            if entry.last_offset >= end_offset {
                return Ok(false);
            }
            kept += 1;
            last = Some(entry);
            Ok(true)
        })?;
        self.truncate_to_entries(io, kept, last)
    }

    /// Opens the file of the segment at `base_offset` as it is on disk, after a crash or not:
    /// whole entries only (a torn last entry, shorter than 34 bytes, is cut, durably). With
    /// `strict` (the segment's data was synced) every whole entry must decode and follow the one
    /// before ([`check_order`]), or the open is [`Error::Corrupt`] naming the file and position;
    /// without it (unsynced entries a power cut may have garbled), the index is cut, durably, at
    /// the first that does not, and the caller checks the rest against the log. No file is an
    /// empty index.
    pub(crate) fn open(
        io: &dyn FileIo,
        path: PathBuf,
        base_offset: i64,
        strict: bool,
    ) -> Result<Self> {
        let mut index = Self::empty(path, base_offset);
        let file = match io.open(&index.path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(index),
            Err(error) => return Err(Error::io(&index.path, error)),
        };
        let len = io
            .len(&file)
            .map_err(|error| Error::io(&index.path, error))?;
        drop(file);
        index.entries = len / TXN_ENTRY_BYTES as u64;
        let (good, last) = index.valid_prefix(io, strict)?;
        if good * (TXN_ENTRY_BYTES as u64) != len {
            index.truncate_to_entries(io, good, last)?;
        }
        index.last = last;
        Ok(index)
    }

    /// How many entries from the start decode and keep the order, and the last of them; with
    /// `strict` a bad one is an error instead.
    fn valid_prefix(&self, io: &dyn FileIo, strict: bool) -> Result<(u64, Option<AbortedTxn>)> {
        let mut good = 0u64;
        let mut last: Option<AbortedTxn> = None;
        let result = self.for_each(io, |entry| {
            let position = good * TXN_ENTRY_BYTES as u64;
            match check_order(self.base_offset, last.as_ref(), &entry) {
                Ok(()) => {}
                Err(reason) if strict => return Err(Error::corrupt(&self.path, position, reason)),
                Err(_) => return Ok(false),
            }
            good += 1;
            last = Some(entry);
            Ok(true)
        });
        match result {
            Ok(()) => Ok((good, last)),
            Err(Error::Corrupt { .. }) if !strict => Ok((good, last)),
            Err(error) => Err(error),
        }
    }
}

/// Makes the entries of the `.txnindex` at `path` durable as `mode` says (the log's flush,
/// which collects the paths under its lock and syncs without it). A file a truncation removed
/// meanwhile has nothing left to sync.
pub(crate) fn sync_file(io: &dyn FileIo, path: &Path, mode: PersistMode) -> Result<()> {
    let file = match io.open(path, OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(Error::io(path, error)),
    };
    io.sync(&file, mode).map_err(|error| Error::io(path, error))
}

/// Removes `path` if it exists.
pub(crate) fn remove_if_present(io: &dyn FileIo, path: &Path) -> Result<()> {
    match io.remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::io(path, error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdIo;
    use proptest::prelude::*;

    fn entry(producer_id: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: first,
        }
    }

    #[test]
    fn kafkas_bytes() {
        let bytes = encode(&entry(7, 100, 250));
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &7i64.to_be_bytes());
        assert_eq!(&bytes[10..18], &100i64.to_be_bytes());
        assert_eq!(&bytes[18..26], &250i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &100i64.to_be_bytes());
        assert_eq!(decode(&bytes), Ok(entry(7, 100, 250)));
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut bytes = encode(&entry(7, 100, 250));
        bytes[1] = 1;
        assert!(decode(&bytes).is_err());
        assert!(decode(&encode(&entry(7, 300, 250))).is_err());
        assert!(decode(&encode(&entry(7, -1, 250))).is_err());
        assert!(decode(&bytes[..33]).is_err());
        assert!(check_order(100, None, &entry(1, 0, 99)).is_err());
        assert!(check_order(100, Some(&entry(1, 0, 120)), &entry(2, 0, 120)).is_err());
        assert!(check_order(100, Some(&entry(1, 0, 120)), &entry(2, 0, 121)).is_ok());
    }

    #[test]
    fn file_life_append_read_truncate_torn_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.txnindex");
        let mut index = TxnIndex::empty(path.clone(), 100);
        for last in [110, 120, 130] {
            index.append(&StdIo, &entry(last, 100, last)).unwrap();
        }
        assert!(index.append(&StdIo, &entry(1, 100, 130)).is_err());
        let mut seen = Vec::new();
        index
            .for_each(&StdIo, |entry| {
                seen.push(entry.last_offset);
                Ok(true)
            })
            .unwrap();
        assert_eq!(seen, [110, 120, 130]);
        index.truncate_from(&StdIo, 120).unwrap();
        assert_eq!(index.size_bytes(), 34);
        assert_eq!(index.last().map(|e| e.last_offset), Some(110));
        // A torn tail is cut at open.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&encode(&entry(9, 100, 140))[..20]);
        std::fs::write(&path, &bytes).unwrap();
        let reopened = TxnIndex::open(&StdIo, path.clone(), 100, true).unwrap();
        assert_eq!(reopened.size_bytes(), 34);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        // A whole entry that is wrong is an error naming the file.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&encode(&entry(9, 100, 105)));
        std::fs::write(&path, &bytes).unwrap();
        let error = TxnIndex::open(&StdIo, path.clone(), 100, true).unwrap_err();
        assert!(
            matches!(&error, Error::Corrupt { path: p, position: 34, .. } if *p == path),
            "{error}"
        );
        // Unsynced entries a cut garbled are cut instead.
        let lenient = TxnIndex::open(&StdIo, path.clone(), 100, false).unwrap();
        assert_eq!(lenient.size_bytes(), 34);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
        index.truncate_from(&StdIo, 0).unwrap();
        assert!(!path.exists());
        assert!(TxnIndex::open(&StdIo, path, 100, true).unwrap().is_empty());
    }

    proptest! {
        #[test]
        fn any_entry_round_trips(
            producer_id in any::<i64>(),
            first in 0i64..i64::MAX / 2,
            span in 0i64..1 << 40,
            lso in 0i64..i64::MAX,
        ) {
            let entry = AbortedTxn {
                producer_id,
                first_offset: first,
                last_offset: first + span,
                last_stable_offset: lso,
            };
            prop_assert_eq!(decode(&encode(&entry)), Ok(entry));
        }

        #[test]
        fn any_bytes_decode_or_refuse_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            let _ = decode(&bytes);
        }
    }
}
