"""Conformance of ``UniqueMixin`` to PynamoDB, checked with PynamoDB's own test suite.

- :mod:`conformance.harness`: extracts ``tests/peer``, runs it plain and with ``UniqueMixin``
  models, and compares outcomes and requests;
- :mod:`conformance.plugin`: the pytest plugin recording them in the peer suite's process;
- :mod:`conformance.shim`: the ``Model`` the rewritten peer tests import.

Run by hand from the repository root: ``python -m tests.conformance [--integration]``.
"""
