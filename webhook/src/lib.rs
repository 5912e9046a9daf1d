//! raygate-webhook (being built).
