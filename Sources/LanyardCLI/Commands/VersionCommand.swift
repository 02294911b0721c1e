import FoundationEssentials
import Glibc
import LanyardCore

extension MetaCommands {
    static let version = CommandSpec(
        name: "version", summary: "print Lanyard's version", arguments: "",
        minArguments: 0, maxArguments: 0, flags: [], prints: true, takesAccount: false, details: "",
        examples: [
            CommandExample("lanyard --version", "print the version"),
            CommandExample("lanyard version --json", "the version as JSON"),
        ]) { inv in
        inv.emit(.object(["version": .string(Lanyard.version)])) { inv.stdout.line("lanyard \(Lanyard.version)") }
        return .ok
    }
}
