"""Homomorphic encryption: Paillier, BatchCrypt, scalar products, vector sums
(DESIGN §9)."""
