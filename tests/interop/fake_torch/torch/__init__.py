"""A stand-in for PyTorch, just enough for Zeus's pipeline frequency optimizer client to be
imported and constructed without a GPU (tests/interop/zeus_pfo_test.py). Not the real torch."""

from . import cuda, distributed  # noqa: F401

__version__ = "0.0.0+kareus-fake"
