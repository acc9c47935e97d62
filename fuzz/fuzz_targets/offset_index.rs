#![no_main]
//! Fuzz target `offset_index`: see `skiff_fuzz::storage::offset_index`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::storage::offset_index(data));
