#![no_main]
//! Fuzz target `down_convert`: see `skiff_fuzz::records::down_convert`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::records::down_convert(data));
