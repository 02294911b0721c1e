import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// Where passphrases come from — never argv: a file named by `LANYARD_PASSPHRASE_FILE`, the
/// output of the `LANYARD_ASKPASS` program, or the terminal with echo off.
package struct PassphraseReader: Sendable {
    /// Read for `LANYARD_PASSPHRASE_FILE` and `LANYARD_ASKPASS`.
    package let environment: [String: String]

    package init(environment: [String: String]) { self.environment = environment }

    /// Reads one passphrase; `confirm` asks twice on a terminal (for new passphrases), and again
    /// from the start when the two differ, up to `tries` times.
    package func read(prompt: String, confirm: Bool = false, tries: Int = 3) throws -> String {
        if let file = environment["LANYARD_PASSPHRASE_FILE"], !file.isEmpty {
            // Refused, not warned about, when others can read it (as ssh refuses such a key).
            guard let data = try SecureFiles.readSecretFile(file) else {
                throw PassphraseError(
                    "cannot read LANYARD_PASSPHRASE_FILE (\(TerminalText.escaped(file))): it does not exist"
                )
            }
            return try Self.firstLine(data, source: "LANYARD_PASSPHRASE_FILE")
        }
        if let program = environment["LANYARD_ASKPASS"], !program.isEmpty {
            return try askpass(program, prompt: prompt)
        }
        guard confirm else { return try terminal(prompt: prompt) }
        for attempt in 1...max(tries, 1) {
            let first = try terminal(
                prompt: attempt == 1 ? prompt : "The passphrases did not match; try again. " + prompt
            )
            if try terminal(prompt: "Repeat to confirm: ") == first { return first }
        }
        throw PassphraseError("the passphrases did not match")
    }

    /// Where `read` takes the passphrase from without asking, for messages about a wrong one:
    /// `LANYARD_PASSPHRASE_FILE PATH` or `LANYARD_ASKPASS PROGRAM` (never the passphrase); nil
    /// when it asks on the terminal.
    package var unattendedSource: String? {
        for name in CredentialStores.passphraseVariables {
            if let value = environment[name], !value.isEmpty { return "\(name) \(TerminalText.escaped(value))" }
        }
        return nil
    }

    /// Runs `body`, which opens something with a passphrase `read` gave: a wrong passphrase from
    /// a file or program is reported naming it (``StoreError/wrongPassphraseFrom(source:)``).
    package func namingSource<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch StoreError.wrongPassphrase {
            guard let source = unattendedSource else { throw StoreError.wrongPassphrase }
            throw StoreError.wrongPassphraseFrom(source: source)
        }
    }

    /// Whether LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS is set, so `read` never asks on the
    /// terminal (commands may then open a locked store on their own).
    package var hasUnattendedSource: Bool {
        ["LANYARD_PASSPHRASE_FILE", "LANYARD_ASKPASS"].contains { environment[$0].map { !$0.isEmpty } == true }
    }

    /// The secret a file or program gives: its first line, without the line's ending (`\n` or
    /// `\r\n`). Spaces are kept: they may be part of it. `what` names the secret in the error.
    /// Cut as bytes: in Swift's `String`, `\r\n` is one `Character`, which is not `"\n"`.
    package static func firstLine(
        _ data: Data,
        source: String,
        what: String = "passphrase"
    ) throws(PassphraseError) -> String {
        var line = Data(data.prefix { $0 != 0x0A })
        if line.last == 0x0D { line.removeLast() }
        guard !line.isEmpty else { throw PassphraseError("\(source) gave an empty \(what)") }
        return String(decoding: line, as: UTF8.self)
    }

    func askpass(_ program: String, prompt: String) throws -> String {
        let run: Subprocess.Result
        do {
            run = try Subprocess.run("/bin/sh", ["-c", "exec \"$0\" \"$1\"", program, prompt], stdout: .capture)
        } catch { throw PassphraseError("cannot run LANYARD_ASKPASS (\(program))") }
        guard run.status == 0 else { throw PassphraseError("LANYARD_ASKPASS exited with status \(run.status)") }
        return try Self.firstLine(Data(run.stdout), source: "LANYARD_ASKPASS")
    }

    /// Reads from /dev/tty with echo off, restoring the terminal even on error (also how
    /// `login --with-access-token` asks for a token on a terminal).
    package func terminal(prompt: String) throws -> String {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw PassphraseError(
                "no terminal to ask for the passphrase; set LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS"
            )
        }
        defer { close(fd) }
        var original = termios()
        tcgetattr(fd, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ICANON)
        // Echo off before the prompt shows: TCSAFLUSH drops input typed so far, which must not
        // include an answer typed as soon as the prompt appeared.
        tcsetattr(fd, TCSAFLUSH, &silent)
        _ = prompt.withCString { Glibc.write(fd, $0, strlen($0)) }
        defer {
            tcsetattr(fd, TCSAFLUSH, &original)
            _ = Glibc.write(fd, "\n", 1)
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while Glibc.read(fd, &byte, 1) == 1 {
            if byte == 0x0a || byte == 0x0d { break }
            bytes.append(byte)
        }
        defer { for i in bytes.indices { bytes[i] = 0 } }
        guard !bytes.isEmpty else { throw PassphraseError("empty passphrase") }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// No usable passphrase (exit 1); never contains the passphrase.
package struct PassphraseError: LanyardError {
    package let message: String
    package init(_ message: String) { self.message = message }
    package var code: ErrorCode { .passphraseUnavailable }
    package var errorDescription: String? { message }
}

/// Opens the credential store of a backend as config.ini says, the same way for the CLI and
/// LanyardKit.
package enum CredentialStores {
    /// The variables that name an unattended passphrase source.
    package static let passphraseVariables = ["LANYARD_PASSPHRASE_FILE", "LANYARD_ASKPASS"]
    /// Every variable ``open(_:config:paths:interactive:passphraseEnvironment:)`` reads: the
    /// passphrase sources and where the TPM is (``TPMLocation/variables``).
    package static let storeVariables = passphraseVariables + TPMLocation.variables

    /// The store of `kind`; `interactive` selects the longer timeout. A file store opens a locked
    /// store on its own when `passphraseEnvironment` names an unattended passphrase source, and
    /// finds its TPM by the variables there (``storeVariables``) and `[store] tpm-tcti`.
    package static func open(
        _ kind: BackendKind,
        config: LanyardConfig,
        paths: Paths,
        interactive: Bool,
        passphraseEnvironment: [String: String]
    ) -> any CredentialStore {
        switch kind {
        case .secretService:
            return SecretServiceStore(
                timeout: interactive ? config.interactiveStoreTimeout : config.storeTimeout,
                collection: config.keyringCollection
            )
        case .file:
            let reader = PassphraseReader(environment: passphraseEnvironment)
            var source: (@Sendable () throws -> String)?
            if reader.hasUnattendedSource {
                source = { try reader.read(prompt: "Passphrase for the Lanyard file store: ") }
            }
            return EncryptedFileStore(
                paths: paths,
                unlockCacheSeconds: config.unlockCacheSeconds,
                passphraseSource: source,
                passphraseSourceName: reader.unattendedSource,
                tpm: .resolve(environment: passphraseEnvironment, configured: config.tpmTCTI)
            )
        }
    }
}
