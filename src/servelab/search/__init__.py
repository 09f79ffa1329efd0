"""Sweeps (layer 3): pure decisions over measured load points — the knee, the
most load within an SLO, the ranking of tuned configs. I/O lives in study/."""
