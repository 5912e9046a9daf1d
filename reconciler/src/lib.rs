//! raygate-reconciler (being built).
