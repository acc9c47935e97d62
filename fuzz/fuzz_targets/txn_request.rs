#![no_main]
//! Fuzz target `txn_request`: see `skiff_fuzz::txn::txn_request`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::txn::txn_request(data));
