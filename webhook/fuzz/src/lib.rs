//! The harness of raygate's fuzz targets: the real admission router (the one `raygate webhook`
//! serves) over informer caches preloaded with a small but complete world, called in-process,
//! and the oracle every answer must satisfy. The world, the realistic objects and the oracle
//! are `raygate_webhook::test_support`, shared with the property test
//! `webhook/tests/fuzz_admission.rs`.

use std::sync::OnceLock;

use axum::Router;

pub use raygate_webhook::test_support::PATHS;

pub mod structured;

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: Router,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| Harness {
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime"),
        router: raygate_webhook::test_support::router(),
    })
}

/// Posts `body` to `path` and checks the answer against the oracle (panicking, which
/// libFuzzer reports as a crash, when it does not hold).
pub fn post_and_check(path: &str, body: Vec<u8>) {
    let harness = harness();
    harness
        .runtime
        .block_on(raygate_webhook::test_support::post_and_check(
            &harness.router,
            path,
            body,
        ));
}
