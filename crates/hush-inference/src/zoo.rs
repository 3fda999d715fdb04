//! Benchmark architectures.
