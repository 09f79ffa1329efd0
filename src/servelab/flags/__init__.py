"""Command-line flags as data: one definition shared by the CLI and by study files (layer 2)."""
