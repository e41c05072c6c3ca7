"""Running RTL under test: the backend protocol, simulators, build cache, census and waivers."""
