"""The panes."""
