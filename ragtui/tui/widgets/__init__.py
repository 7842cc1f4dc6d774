"""The TUI's widgets, one per module, each carrying its own CSS."""
