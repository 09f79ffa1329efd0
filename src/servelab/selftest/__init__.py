"""The client measured against the mock's truth (layer 4: wires mock + loadgen)."""
