import LanyardSupport

/// Where Lanyard keeps its files, from the XDG base-directory variables (with their documented
/// defaults under `$HOME`). Built from an injected environment so tests never touch real folders.
package struct Paths: Hashable, Sendable {
    /// `$XDG_CONFIG_HOME/lanyard`: config.ini.
    package var configDirectory: String
    /// `$XDG_DATA_HOME/lanyard`: the registry and the encrypted store.
    package var dataDirectory: String
    /// `$XDG_STATE_HOME/lanyard`: the event log and recovery files.
    package var stateDirectory: String
    /// `$XDG_RUNTIME_DIR/lanyard`: per-process homes (`exec`).
    package var runtimeDirectory: String
    /// `$XDG_DATA_HOME/lanyard/locks`: the per-slot refresh locks and the agent's lock. They live
    /// beside the data they guard, so every process that shares the data shares the locks, whether
    /// or not it has `XDG_RUNTIME_DIR` (cron jobs and units often differ from desktop shells).
    package var lockDirectory: String { dataDirectory + "/locks" }

    package init(configDirectory: String, dataDirectory: String, stateDirectory: String, runtimeDirectory: String) {
        self.configDirectory = configDirectory
        self.dataDirectory = dataDirectory
        self.stateDirectory = stateDirectory
        self.runtimeDirectory = runtimeDirectory
    }

    /// Paths from an environment; relative XDG values are ignored, as the spec requires.
    package init(environment env: [String: String]) {
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? PathText.passwordDatabaseHome()
        func base(_ name: String, _ fallback: String) -> String {
            if let v = env[name], v.hasPrefix("/") { return v }
            return home + "/" + fallback
        }
        configDirectory = base("XDG_CONFIG_HOME", ".config") + "/lanyard"
        dataDirectory = base("XDG_DATA_HOME", ".local/share") + "/lanyard"
        stateDirectory = base("XDG_STATE_HOME", ".local/state") + "/lanyard"
        if let runtime = env["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            runtimeDirectory = runtime + "/lanyard"
        } else {
            runtimeDirectory = dataDirectory + "/run"
        }
    }

    package var configFile: String { configDirectory + "/config.ini" }
    package var registryFile: String { dataDirectory + "/registry.json" }
    package var encryptedStoreFile: String { dataDirectory + "/store.age" }
    /// The next registry, written before the file-store write it must land with and renamed into
    /// place after it (``RegistryTransaction``). Its name must never look like a GLib temporary
    /// (six letters or digits after the dot) to ``LeftoverTemporaries``.
    package var incomingRegistryFile: String { registryFile + ".incoming" }
    /// The next file store, staged by a ``RegistryTransaction`` until the store is replaced by it.
    package var incomingStoreFile: String { encryptedStoreFile + ".incoming" }
}
