"""Runs on the GPU machine: sets from seeds, collection, validation, records, figures."""
