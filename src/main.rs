//! The raygate command line.
fn main() {}
