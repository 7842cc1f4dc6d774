"""Reliability: faults injected into every layer (issue #8); spec/reliability.md says what each test proves."""
