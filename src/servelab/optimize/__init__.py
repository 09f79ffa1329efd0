"""`servelab optimize`: the consultancy method as one command — diagnose, change, measure, keep or revert, write it up."""
