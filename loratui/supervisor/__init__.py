"""The owner side of a run: launch, the detached supervisor, its GPU sampler and control channel, restart.

Viewers (`loratui.tui`, `loratui.sources`) never import this package; the trainer never imports it either.
"""
