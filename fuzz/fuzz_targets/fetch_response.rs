#![no_main]
//! Fuzz target `fetch_response`: see `skiff_fuzz::responses::fetch_response`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::responses::fetch_response(data));
