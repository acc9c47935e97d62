#![no_main]
//! Fuzz target `frame`: see `skiff_fuzz::requests::frame`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::requests::frame(data));
