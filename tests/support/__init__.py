"""Helpers and fixtures shared by the tests, by subject; tests import them from here, never from each other.

Fixtures defined here are registered in tests/conftest.py (pytest_plugins).
"""
