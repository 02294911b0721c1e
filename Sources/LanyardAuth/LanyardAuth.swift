// LanyardAuth: see docs/architecture.md.
