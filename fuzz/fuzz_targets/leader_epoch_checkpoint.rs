#![no_main]
//! Fuzz target `leader_epoch_checkpoint`: see `skiff_fuzz::storage::leader_epoch_checkpoint`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| skiff_fuzz::storage::leader_epoch_checkpoint(data));
