#![no_main]
//! Fuzz target `acl_file`: see `skiff_fuzz::broker::acl_file`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::broker::acl_file(data));
