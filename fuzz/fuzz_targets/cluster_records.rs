#![no_main]
//! Fuzz target `cluster_records`: see `skiff_fuzz::cluster::cluster_records`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::cluster::cluster_records(data));
