#![no_main]
//! Fuzz target `sasl_bare`: see `skiff_fuzz::broker::sasl_bare`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::broker::sasl_bare(data));
