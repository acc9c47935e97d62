#![no_main]
//! Fuzz target `request`: see `skiff_fuzz::requests::request`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::requests::request(data));
