//! raygate's end-to-end test harness: the real control plane of `tests/env` seen from Rust.
//!
//! Tests using it run inside the environment's network namespace:
//!
//! ```sh
//! tests/env/control-plane up
//! tests/env/control-plane exec -- cargo test -p raygate-e2e
//! ```
//!
//! * [`Env`] reads the environment file `control-plane up` writes and builds a `kube::Client`;
//! * [`TestNamespace`] is a fresh Kubernetes namespace per test, deleted when dropped, with
//!   [`TestNamespace::wait_for`] to poll a condition and dump the namespace when it times out;
//! * [`corpus`] reads every manifest of `tests/corpus/`, `manifests/examples/` and `docs/` and
//!   what its header promises;
//! * [`examples`] reads the example manifests of `manifests/examples/` and what they promise;
//! * [`ray::Dashboard`] talks to the Ray head's Jobs API;
//! * [`raygate`] runs raygate's own binary, [`kubectl`] the machine's kubectl;
//! * [`reconciler`] runs a test's own `raygate reconcile` for its namespace;
//! * [`nodes::FakeNode`] is a kwok node of a test's own, with the capacity it chooses;
//! * [`kuberay`] runs a test's own KubeRay operator for its namespaces;
//! * [`cleanup`] deletes a test's cluster-scoped objects when their guards drop;
//! * [`runner`] holds the pure parts of the `submitter-runner` binary;
//! * [`image`] reads raygate's container image and the `Dockerfile` without a container engine.

pub mod cleanup;
pub mod corpus;
pub mod env;
pub mod examples;
pub mod image;
pub mod kubectl;
pub mod kuberay;
pub mod namespace;
pub mod nodes;
pub mod pem;
pub mod ray;
pub mod raygate;
pub mod rbac;
pub mod reconciler;
pub mod runner;
pub mod seeded;

pub use env::Env;
pub use namespace::TestNamespace;

/// A free loopback port, the kernel's choice (bound and released at once; nothing else in the
/// network namespace races for it).
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    let [port] = free_ports();
    port
}

/// `N` distinct free loopback ports. All are held until the last is bound: a port released at
/// once may be the kernel's next choice too, and two listeners given the same port make the
/// second program fail to start.
///
/// # Panics
/// When no port can be bound.
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: [std::net::TcpListener; N] = std::array::from_fn(|_| {
        std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port")
    });
    listeners.map(|listener| {
        listener
            .local_addr()
            .expect("a bound listener's address")
            .port()
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn free_ports_are_distinct() {
        for _ in 0..100 {
            let ports = super::free_ports::<8>();
            assert_eq!(BTreeSet::from(ports).len(), 8, "{ports:?}");
        }
    }
}
