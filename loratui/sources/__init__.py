"""Sources of data over time: GPU probe, sampler, control channel, run-log readers."""
