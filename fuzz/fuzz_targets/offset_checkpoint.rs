#![no_main]
//! Fuzz target `offset_checkpoint`: see `skiff_fuzz::storage::offset_checkpoint`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::storage::offset_checkpoint(data));
