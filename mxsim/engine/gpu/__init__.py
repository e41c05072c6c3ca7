"""The GPU engine (H1 owns this file; a minimal placeholder on the cuda branch)."""
