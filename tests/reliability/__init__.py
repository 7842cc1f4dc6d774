"""Reliability: faults injected into every layer; spec/reliability.md says what each test proves."""
