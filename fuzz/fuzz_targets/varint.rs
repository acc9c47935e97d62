#![no_main]
//! Fuzz target `varint`: see `skiff_fuzz::records::varint`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::records::varint(data));
