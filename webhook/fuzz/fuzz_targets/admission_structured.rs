//! Structured AdmissionReviews (`arbitrary`): realistic Ray Pods, RayJobs, RayClusters and
//! QueuePolicies under arbitrary edits, operations, namespaces and kinds, on every admission
//! path (see `raygate_webhook_fuzz::structured`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use raygate_webhook_fuzz::post_and_check;
use raygate_webhook_fuzz::structured::Input;

fuzz_target!(|input: Input| {
    let (path, body) = input.review();
    post_and_check(path, body);
});
