//! Test harness for raygate integration and end-to-end tests.
