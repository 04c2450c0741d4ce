"""Reference models and data shared by the demo, the tests and the benchmarks."""
