"""Test helpers shipped with the package, so tests, benchmarks and offline demos share them."""

from .fake_server import FakeModelServer, Fault

__all__ = ["FakeModelServer", "Fault"]
