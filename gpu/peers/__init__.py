"""Other labs' real-GPU data and peer simulators: the K&M sets, MMA-Sim parity."""
