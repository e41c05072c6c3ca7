"""The documented verification runs as campaign tasks: every format pair, GST-FDPA."""
