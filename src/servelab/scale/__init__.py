"""Scale-out: N replicas released at one instant, counted in one common window (``servelab scale``)."""
