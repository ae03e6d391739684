"""Statistics of a run's measurements: one ``Distribution`` over three sources (exact samples, the
streamed HDR aggregates, the rig's bins)."""
