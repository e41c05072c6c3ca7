"""hdl package (placeholder; see DESIGN.md)."""
