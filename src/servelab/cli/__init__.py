"""Command line (layer 5): parse, call the library, print. Imports are lazy."""
