#![no_main]
//! Fuzz target `batch_v2`: see `skiff_fuzz::records::batch_v2`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::records::batch_v2(data));
