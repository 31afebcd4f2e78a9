"""Tests of the dsmount Python package (unit tests; see README.md)."""
