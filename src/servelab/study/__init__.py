"""Studies: the one place that wires engines, load, telemetry and results (layer 4)."""
