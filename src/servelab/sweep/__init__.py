"""Sweeps and tuning: choose the next run from the last — load ladders to the knee, knob tuning
(``servelab sweep``, ``servelab tune``)."""
