// The namespaces the commands' specs are declared in. Each command (and each subcommand of a
// group such as `store`) is in a file of its own: Store/StoreInit.swift, LoginCommand.swift, …

enum AgentCommands {}

enum AuthCommands {}

enum BundleCommands {}

/// The credential protocols other tools speak (Docker, Kubernetes, netrc), each a thin adapter
/// over the fresh-credential path `git-credential` uses: refresh when due, one refresh per slot,
/// a token only for what config.ini maps.
enum CredentialHelperCommands {}

enum GitCredentialCommand {}

enum IntegrationCommands {}

enum MetaCommands {}

enum ResolutionCommands {}

enum SlotCommands {}

/// `lanyard store init|unlock|lock|status|migrate`: the encrypted-file store, and moving slots
/// between backends.
enum StoreGroupCommand {}
