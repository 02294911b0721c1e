// LanyardIntegrations: see docs/architecture.md.
