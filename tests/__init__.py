"""The test suite; a package, so that `tests/sandbox` is `tests.sandbox` and never shadows the `sandbox` package."""
