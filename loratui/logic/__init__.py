"""Pure logic: no Textual, no torch, no I/O."""
