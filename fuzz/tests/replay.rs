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
