"""Arrays of units: the array RTL against the array cycle model, mutants, the 4 x 4 run."""
