"""Studies: the study file, its engine sessions and resumable runs (``servelab study``, ``demo``)."""
