"""``servelab optimize``: diagnose, change what the verdict names, keep it only when it is
better beyond noise, repeat; then the operating point. Layer L4.3 (above sweep)."""
