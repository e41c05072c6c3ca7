"""The generated unit's benches: stimulus, coverage, harnesses, mutants, mxsim verify."""
