//! Arbitrary bytes as the body of an admission or conversion review: the first byte picks
//! the path, the rest is the body. Seeds: `seeds/` (realistic reviews of every kind); the
//! dictionary `admission.dict` holds the JSON keys and values the handlers read.

#![no_main]

use libfuzzer_sys::fuzz_target;
use raygate_webhook_fuzz::{PATHS, post_and_check};

fuzz_target!(|data: &[u8]| {
    let Some((selector, body)) = data.split_first() else {
        return;
    };
    let path = PATHS[usize::from(*selector) % PATHS.len()];
    post_and_check(path, body.to_vec());
});
