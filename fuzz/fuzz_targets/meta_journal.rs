#![no_main]
//! Fuzz target `meta_journal`: see `skiff_fuzz::meta::meta_journal`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::meta::meta_journal(data));
