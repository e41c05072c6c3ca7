"""Running RTL under test: the backend protocol, the simulators, the build cache."""
