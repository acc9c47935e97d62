#![no_main]
//! Fuzz target `recovery_scan`: see `skiff_fuzz::storage::recovery_scan`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::storage::recovery_scan(data));
