//! The memory of the webhook's Node cache: what holding the shapes of a cluster's Nodes costs,
//! per 1,000 Nodes, next to holding the Node objects themselves (as a reflector store would).
//!
//! Run with `cargo bench -p raygate-webhook --bench node_cache`. Builds the cache the way the
//! webhook fills it (page by page, each Node reduced to its shape before the next page is
//! read) from realistic Nodes (a GPU node as a managed Kubernetes service reports it: 14 labels,
//! a taint, 8 allocatable resources, 5 conditions, 30 images), and prints the growth of the
//! process's resident set (`VmRSS`) per 1,000 Nodes for the shapes and for the Nodes.

use std::hint::black_box;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use raygate_webhook::{Caches, Preloaded};

#[path = "shared/nodes.rs"]
mod nodes;

/// The same allocator as the `raygate` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Nodes held in each measurement.
const NODES: usize = 20_000;
/// Nodes per page of the initial list.
const PAGE: usize = 100;

/// The process's resident set, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// KiB per 1,000 Nodes of a growth of `grown` KiB.
fn per_thousand(grown: u64) -> f64 {
    grown as f64 * 1000.0 / NODES as f64
}

fn main() {
    // Warm the allocator and the JSON machinery, so that neither is counted.
    black_box(nodes::node(0, true));

    let before = rss_kib();
    let caches = Caches::preloaded_in_pages((0..NODES / PAGE).map(|page| {
        Preloaded {
            nodes: (page * PAGE..(page + 1) * PAGE)
                .map(|i| nodes::node(i, true))
                .collect(),
            ..Preloaded::default()
        }
    }));
    let shapes = caches.nodes();
    let shapes_grown = rss_kib().saturating_sub(before);
    assert_eq!(shapes.len(), NODES);

    let before = rss_kib();
    let whole: Vec<Arc<Node>> = (0..NODES).map(|i| Arc::new(nodes::node(i, true))).collect();
    let whole_grown = rss_kib().saturating_sub(before);
    black_box(&whole);

    println!("Node cache memory, {NODES} Nodes (VmRSS growth):");
    println!(
        "  node shapes (the webhook's cache): {:.0} KiB per 1,000 Nodes",
        per_thousand(shapes_grown)
    );
    println!(
        "  whole Node objects:                {:.0} KiB per 1,000 Nodes",
        per_thousand(whole_grown)
    );
    black_box(&shapes);
}
