"""testbenches package (placeholder; see DESIGN.md)."""
