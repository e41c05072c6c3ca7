"""gpu package (placeholder; see DESIGN.md)."""
