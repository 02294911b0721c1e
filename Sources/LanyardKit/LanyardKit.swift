// LanyardKit: see docs/architecture.md.
