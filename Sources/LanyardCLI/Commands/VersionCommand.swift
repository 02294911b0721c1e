import LanyardSupport

extension MetaCommands {
    static let version = CommandSpec(
        name: "version",
        summary: "print Lanyard's version",
        arguments: "",
        minArguments: 0,
        maxArguments: 0,
        flags: [],
        prints: true,
        takesAccount: false,
        details: "",
        examples: [
            CommandExample("lanyard --version", "print the version"),
            CommandExample("lanyard version --json", "the version as JSON"),
        ]
    ) { inv in
        inv.emit(VersionView(version: Lanyard.version)) { inv.stdout.line("lanyard \(Lanyard.version)") }
        return .ok
    }
}

/// `version --json`.
struct VersionView: JSONView {
    static let keys = ["version"]
    let version: String
    var json: JSONValue { .object(["version": .string(version)]) }
}
