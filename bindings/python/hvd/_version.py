"""The hvd package's version; it must match the libhvd it loads in major.minor (hvd._lib checks).

bindings/c/hvd.h holds the same number (HVD_VERSION_*), which tests/test_version.py checks."""
__version__ = "0.2.0"
