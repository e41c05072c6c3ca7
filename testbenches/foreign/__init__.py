"""RTL that users wrote, behind a port map: backend, harnesses, timing, fit --rtl, rtl observe."""
