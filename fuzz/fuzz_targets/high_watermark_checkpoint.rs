#![no_main]
//! Fuzz target `high_watermark_checkpoint`: see `skiff_fuzz::storage::high_watermark_checkpoint`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::storage::high_watermark_checkpoint(data));
