#![no_main]
//! Fuzz target `config_toml`: see `skiff_fuzz::broker::config_toml`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::broker::config_toml(data));
