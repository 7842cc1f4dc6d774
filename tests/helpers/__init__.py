"""Test helpers: real servers and fixtures shared by several test modules."""
