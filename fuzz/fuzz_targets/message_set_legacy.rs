#![no_main]
//! Fuzz target `message_set_legacy`: see `skiff_fuzz::records::message_set_legacy`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::records::message_set_legacy(data));
