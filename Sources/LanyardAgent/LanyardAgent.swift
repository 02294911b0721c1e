// LanyardAgent: see docs/architecture.md.
