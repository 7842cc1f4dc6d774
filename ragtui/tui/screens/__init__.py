"""The TUI's screens, one per module, each carrying its own CSS and bindings."""
