#![no_main]
//! Fuzz target `txn_peer_response`: see `skiff_fuzz::txn::txn_peer_response`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::txn::txn_peer_response(data));
