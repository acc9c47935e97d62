#![no_main]
//! Fuzz target `offsets_log`: see `skiff_fuzz::group::offsets_log`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::group::offsets_log(data));
