//! Replays every committed corpus file through its target body, so crashers found by cargo fuzz
//! stay fixed in the ordinary test suite.

use std::path::Path;

#[test]
fn every_target_has_a_corpus_and_replays_it() {
    let corpus_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut replayed_count = 0usize;
    for (name, body) in skiff_fuzz::targets() {
        let dir = corpus_root.join(name);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("target {name} has no corpus at {dir:?}: {error}"));
        let mut files = 0usize;
        for entry in entries {
            let path = entry.expect("corpus entry").path();
            let data = std::fs::read(&path).expect("corpus file");
            body(&data);
            files += 1;
        }
        assert!(files > 0, "corpus of {name} is empty");
        replayed_count += files;
    }
    println!("replayed {replayed_count} corpus files");
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, _) in skiff_fuzz::targets() {
        let file = root.join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.exists(), "missing {file:?}");
    }
}

/// The hand-made seeds of the config and partition admin APIs (CreatePartitions, AlterConfigs,
/// IncrementalAlterConfigs, every version), of OffsetsForLeaderEpoch (v0–v4) and of ElectLeaders (v0–v2) are valid requests, so fuzzing starts from inside each
/// decoder rather than at its first error.
#[test]
fn admin_api_seeds_decode() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/request");
    let mut seen = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("request corpus") {
        let data = std::fs::read(entry.expect("entry").path()).expect("file");
        let Some(key) = data.get(..4) else { continue };
        let (api_key, version) = (
            i16::from_be_bytes([key[0], key[1]]),
            i16::from_be_bytes([key[2], key[3]]),
        );
        if ![23, 33, 37, 43, 44].contains(&api_key) {
            continue;
        }
        let frame = bytes::Bytes::from(data);
        if skiff_protocol::requests::decode_request(&frame).is_ok() {
            seen.insert((api_key, version));
        }
    }
    let expected: std::collections::BTreeSet<(i16, i16)> = (0..4)
        .map(|version| (37, version))
        .chain((0..3).map(|version| (33, version)))
        .chain((0..2).map(|version| (44, version)))
        .chain((0..5).map(|version| (23, version)))
        .chain((0..3).map(|version| (43, version)))
        .collect();
    assert_eq!(seen, expected);
}

/// The hand-made Fetch response seeds (v4, v12 with DivergingEpoch and CurrentLeader, v13 with a
/// topic id) are valid, so fuzzing starts inside the reader.
#[test]
fn fetch_response_seeds_decode() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/fetch_response");
    let mut decoded = 0;
    for entry in std::fs::read_dir(&dir).expect("fetch_response corpus") {
        let data = std::fs::read(entry.expect("entry").path()).expect("file");
        let Some((&selector, frame)) = data.split_first() else {
            continue;
        };
        let version = 4 + i16::from(selector % 10);
        let view = skiff_protocol::responses::fetch_reader::decode_fetch_response(frame, version)
            .unwrap_or_else(|error| panic!("seed v{version}: {error}"));
        assert!(view.topics[0].partitions[0].records.len() == 40);
        decoded += 1;
    }
    assert!(decoded >= 3);
}

/// The hand-made high-watermark checkpoint seeds `valid`, `empty` and `leading_zeros` are
/// accepted (so fuzzing starts inside the parser's accepting path, not only at its refusals),
/// and the others are refused as corrupt.
#[test]
fn high_watermark_seeds_read_as_named() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/high_watermark_checkpoint");
    let scratch = std::env::temp_dir().join(format!("skiff-hw-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let dir =
        skiff_storage::LogDir::open(&scratch, skiff_storage::LogConfig::default()).expect("open");
    let mut accepted = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&corpus).expect("corpus") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        std::fs::copy(&path, scratch.join("replication-offset-checkpoint")).expect("copy");
        match dir.read_high_watermarks() {
            Ok(entries) => {
                accepted.insert(name, entries.len());
            }
            Err(skiff_storage::Error::Corrupt { .. }) => {}
            Err(other) => panic!("{name}: {other}"),
        }
    }
    drop(dir);
    let _ = std::fs::remove_dir_all(&scratch);
    let expected: std::collections::BTreeMap<String, usize> = [
        ("empty".to_owned(), 0),
        ("leading_zeros".to_owned(), 2),
        ("valid".to_owned(), 3),
    ]
    .into();
    assert_eq!(accepted, expected);
}
