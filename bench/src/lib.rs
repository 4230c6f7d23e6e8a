//! Benchmarks and load generators.
