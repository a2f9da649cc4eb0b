"""Domain tables: NVLink topology, XID codes, MIG profiles, power specifications and list prices."""
