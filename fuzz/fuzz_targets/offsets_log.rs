#![no_main]
//! Fuzz target `offsets_log`: see `skiff_fuzz::broker::offsets_log`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::broker::offsets_log(data));
