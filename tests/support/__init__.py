"""Helpers the test modules share: clients, names, waiting, broker processes.

Fixtures live in tests/conftest.py and call these; test modules import these modules, never a conftest.
"""
