import Age
import FoundationEssentials
import Glibc
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// Where Codex keeps its sign-in: `cli_auth_credentials_store` in `$CODEX_HOME/config.toml`.
package enum CodexCredentialsStore: String, Sendable, Equatable {
    /// `$CODEX_HOME/auth.json` (Codex's default).
    case file
    /// The keyring only (Codex fails when it does not answer).
    case keyring
    /// The keyring when it answers, else auth.json.
    case auto
    /// Memory only: no switch can reach it.
    case ephemeral
}

/// Reading and writing a Codex home's sign-in, where Codex reads it: auth.json, or in keyring
/// mode Codex's keyring item.
package struct CodexHome: Sendable {
    package let directory: String
    package var authPath: String { directory + "/auth.json" }
    package var configPath: String { directory + "/config.toml" }

    /// The keyring item's service, as Codex names it (`KEYRING_SERVICE` in
    /// codex-rs/login/src/auth/storage.rs).
    package static let keyringService = "Codex Auth"
    /// How long one keyring call may take.
    static let keyringTimeout: TimeInterval = 10

    package init(directory: String) { self.directory = directory }

    /// `--codex-home`, else `$CODEX_HOME`, else `~/.codex`.
    package init(explicit: String?, environment: [String: String]) {
        if let explicit {
            directory = explicit
        } else if let env = environment["CODEX_HOME"], !env.isEmpty {
            directory = env
        } else {
            directory = (environment["HOME"] ?? PathText.passwordDatabaseHome()) + "/.codex"
        }
    }

    /// The store config.toml names (`file` when there is no config.toml or no such key).
    package func credentialsStore() throws -> CodexCredentialsStore { try credentialsStore(in: configText()) }

    /// config.toml's text, nil when there is none.
    private func configText() throws -> String? {
        try SecureFiles.read(configPath).map { String(decoding: $0, as: UTF8.self) }
    }

    private func credentialsStore(in text: String?) throws -> CodexCredentialsStore {
        guard let text else { return .file }
        let value: String?
        do { value = try CodexConfigTOML.topLevelString("cli_auth_credentials_store", in: text) } catch {
            throw StoreError.corrupt(source: configPath, detail: error.problem)
        }
        guard let value else { return .file }
        guard let store = CodexCredentialsStore(rawValue: value) else {
            throw StoreError.corrupt(
                source: configPath,
                detail: "cli_auth_credentials_store is \(TerminalText.escaped(value).debugDescription), "
                    + "not one of file, keyring, auto, ephemeral"
            )
        }
        return store
    }

    /// Whether config.toml turns on Codex's `secret_auth_storage` feature: in keyring mode the
    /// sign-in then lives in `secrets/codex_auth.age` under a key kept in the keyring, not in the
    /// keyring item itself (Codex's default on Linux).
    private func keepsSignInInEncryptedSecrets(_ text: String?) throws -> Bool {
        guard let text else { return false }
        do { return try CodexConfigTOML.boolean(["features", "secret_auth_storage"], in: text) ?? false } catch {
            throw StoreError.corrupt(source: configPath, detail: error.problem)
        }
    }

    /// The account of Codex's keyring item for this home, as Codex computes it
    /// (`compute_store_key`): `cli|` and the first 16 hex digits of the SHA-256 of the home's
    /// canonical path (the path as given when it cannot be resolved).
    package var keyringAccount: String {
        let canonical =
            realpath(directory, nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            } ?? directory
        return "cli|" + String(hexString(SHA256.digest(Array(canonical.utf8))).prefix(16))
    }

    /// Where the sign-in goes and comes from, resolved from config.toml (and, in `auto` mode,
    /// from whether a keyring answers).
    enum Location {
        case file
        case keyring(CodexKeyringItem)
    }

    func location() throws -> Location {
        let config = try configText()  // read once for both settings
        let store = try credentialsStore(in: config)
        switch store {
        case .file: return .file
        case .ephemeral:
            throw IntegrationError.unsupported(
                "Codex keeps its sign-in in memory only (cli_auth_credentials_store = ephemeral "
                    + "in \(configPath)): nothing Lanyard writes reaches it; set it to file, keyring or auto"
            )
        case .keyring, .auto:
            let item = CodexKeyringItem(
                service: Self.keyringService,
                account: keyringAccount,
                timeout: Self.keyringTimeout
            )
            switch item.problem() {
            case nil:
                // Codex's other keyring backend keeps the sign-in in secrets/codex_auth.age, with
                // only that file's key in the keyring: an item written here would not be read.
                if try keepsSignInInEncryptedSecrets(config) {
                    throw IntegrationError.unsupported(
                        "Codex keeps its sign-in in an encrypted file whose key is in the keyring "
                            + "([features] secret_auth_storage = true in \(configPath)), "
                            + "which Lanyard cannot write; turn that "
                            + "feature off, or set cli_auth_credentials_store = \"file\""
                    )
                }
                return .keyring(item)
            // With no keyring at all, Codex in auto mode uses auth.json.
            case .unavailable? where store == .auto: return .file
            case let problem?:
                throw IntegrationError.codexKeyringUnavailable(
                    mode: store.rawValue,
                    problem: CodexKeyringItem.describe(problem)
                )
            }
        }
    }

    /// Where Codex reads its sign-in, for messages: auth.json's path, or the keyring item.
    package func signInPlace() -> String {
        if case .keyring(let item)? = try? location() {
            return "the keyring item \"\(item.service)\" / \(item.account)"
        }
        return authPath
    }

    /// The live sign-in, or nil when there is none.
    package func readSignIn() throws -> CodexSignIn? {
        switch try location() {
        case .file:
            guard let data = try SecureFiles.read(authPath) else { return nil }
            return try CodexSignIn.parse(data, path: authPath)
        case .keyring(let item):
            guard let text = try item.read() else { return nil }
            return try CodexSignIn.parse(Data(text.utf8), path: item.place)
        }
    }

    /// The live ChatGPT tokens, or nil when there are none (no sign-in, or a personal access token).
    package func read() throws -> CodexAuthFile? { try readSignIn()?.chatGPT }

    /// Writes the sign-in where Codex reads it: auth.json atomically at 0600 (Codex requires its
    /// home to exist already), or Codex's keyring item, after which auth.json is removed, as
    /// Codex removes it when it saves to the keyring.
    package func write(_ signIn: CodexSignIn) throws {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory else {
            throw IntegrationError.unsupported("Codex home \(directory) does not exist (create it, or run Codex once)")
        }
        switch try location() {
        case .file:
            try SecureFiles.atomicWrite(Data(signIn.json.serialized(pretty: true).utf8), to: authPath)
        case .keyring(let item):
            try item.write(signIn.json.serialized(pretty: false))
            if unlink(authPath) != 0 && errno != ENOENT {
                throw StoreError.io(path: authPath, detail: SystemCallError.reason())
            }
        }
    }

    /// Writes ChatGPT tokens (see ``write(_:)-(CodexSignIn)``).
    package func write(_ file: CodexAuthFile) throws { try write(CodexSignIn(.chatgpt(file))) }

    /// Codex processes running now (they keep the account they started with until restarted).
    package static func runningProcesses() -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let comm = FileManager.default.contents(atPath: "/proc/\(pid)/comm") else { return false }
            let name = String(decoding: comm, as: UTF8.self).trimmingWhitespaceAndNewlines()
            return name == "codex" || name.hasPrefix("codex-")
        }
    }
}

/// Codex's keyring entry (codex-rs/keyring-store): one ``RustKeyringEntry``, whose value may be
/// split (`CODEX_CHUNKED:<count>:<first part>`, the other parts under `<account>:<n>`) by
/// versions that chunk long values; Lanyard reads both and writes one whole value, which every
/// version reads.
struct CodexKeyringItem: Sendable {
    let service: String
    let account: String
    let timeout: TimeInterval

    static let chunkedPrefix = "CODEX_CHUNKED:"

    var place: String { "Codex's keyring item (service \"\(service)\", account \(account))" }

    private func entry(_ account: String) -> RustKeyringEntry {
        RustKeyringEntry(service: service, username: account, timeout: timeout)
    }

    func problem() -> RustKeyringEntry.Failure? { entry(account).problem() }

    static func describe(_ failure: RustKeyringEntry.Failure) -> String {
        switch failure {
        case .unavailable(let why): return "no keyring answers (\(why))"
        case .locked: return "the keyring is locked"
        case .ambiguous(let count):
            return
                "the keyring holds \(count) items for it (Codex refuses those too; remove the extra ones in Seahorse)"
        case .timedOut: return "the keyring did not answer in time"
        case .failed(let why): return "the keyring failed (\(why))"
        }
    }

    private func fail(_ failure: RustKeyringEntry.Failure) -> IntegrationError {
        .codexKeyringUnavailable(mode: "keyring", problem: Self.describe(failure))
    }

    /// The whole value, or nil when there is no item.
    func read() throws -> String? {
        do {
            guard let main = try entry(account).read() else { return nil }
            guard main.hasPrefix(Self.chunkedPrefix) else { return main }
            let rest = main.dropFirst(Self.chunkedPrefix.count)
            guard let colon = rest.firstIndex(of: ":"), let count = Int(rest[..<colon]), count >= 1, count <= 1000
            else { return main }
            var whole = String(rest[rest.index(after: colon)...])
            for part in 1..<count {
                guard let piece = try entry("\(account):\(part)").read() else {
                    throw StoreError.corrupt(source: place, detail: "part \(part) of \(count) is missing")
                }
                whole += piece
            }
            return whole
        } catch let failure as RustKeyringEntry.Failure {
            throw fail(failure)
        }
    }

    /// Stores `value` whole, removing the parts a chunked value before it left.
    func write(_ value: String) throws {
        do {
            let main = entry(account)
            let old = try main.read()
            try main.write(value)
            if let old, old.hasPrefix(Self.chunkedPrefix) {
                let rest = old.dropFirst(Self.chunkedPrefix.count)
                if let colon = rest.firstIndex(of: ":"), let count = Int(rest[..<colon]), count > 1, count <= 1000 {
                    for part in 1..<count { try entry("\(account):\(part)").delete() }
                }
            }
        } catch {
            throw fail(error)
        }
    }
}

/// Just enough TOML to read one top-level string key of Codex's config.toml: comments, basic and
/// literal strings (one-line and multi-line), arrays and inline tables spanning lines, and table
/// headers (after the first one, no key is top-level any more).
enum CodexConfigTOML {
    struct Problem: Error { let problem: String }

    /// The string value of `key` before the first table header, nil when absent.
    static func topLevelString(_ key: String, in text: String) throws(Problem) -> String? {
        guard let value = try find([key], in: text) else { return nil }
        guard case .string(let string) = value else { throw Problem(problem: "\(key) is not a quoted string") }
        return string
    }

    /// The boolean at the full dotted path `path` (`["features", "secret_auth_storage"]` matches
    /// `secret_auth_storage = true` under `[features]`, or `features.secret_auth_storage = true`
    /// at the top level), nil when absent.
    static func boolean(_ path: [String], in text: String) throws(Problem) -> Bool? {
        guard let value = try find(path, in: text) else { return nil }
        guard case .boolean(let flag) = value else {
            throw Problem(problem: "\(path.joined(separator: ".")) is not true or false")
        }
        return flag
    }

    /// The value at the full dotted path `path`: `.other` for a value neither a string nor a boolean.
    private static func find(_ path: [String], in text: String) throws(Problem) -> Value? {
        var scanner = Scanner(Array(text.unicodeScalars))
        var table: [String]? = []  // nil inside an array of tables ([[…]]), which no path here names
        while let line = try scanner.nextStatement() {
            switch line {
            case .table(let name): table = name
            case .pair(let name, let value):
                if let table, table + name == path { return value ?? .other }
            }
        }
        return nil
    }

    enum Statement {
        /// A table header: its dotted name (nil for an array of tables).
        case table([String]?)
        /// A key (dotted parts) and its value when it is a string or a boolean (nil for any other).
        case pair([String], Value?)
    }

    enum Value {
        case string(String)
        case boolean(Bool)
        case other
    }

    struct Scanner {
        let s: [Unicode.Scalar]
        var i = 0
        init(_ s: [Unicode.Scalar]) { self.s = s }

        var atEnd: Bool { i >= s.count }
        var peek: Unicode.Scalar? { i < s.count ? s[i] : nil }
        func peek(_ text: String) -> Bool {
            let t = Array(text.unicodeScalars)
            return i + t.count <= s.count && Array(s[i..<i + t.count]) == t
        }

        mutating func skipBlank() { while let c = peek, c == " " || c == "\t" { i += 1 } }
        mutating func skipComment() { if peek == "#" { while let c = peek, c != "\n" { i += 1 } } }
        mutating func endLine() throws(Problem) {
            skipBlank()
            skipComment()
            if atEnd { return }
            if peek == "\r" { i += 1 }
            guard peek == "\n" else { throw Problem(problem: "unexpected text after a value on line \(lineNumber)") }
            i += 1
        }
        var lineNumber: Int { s[..<min(i, s.count)].filter { $0 == "\n" }.count + 1 }

        mutating func nextStatement() throws(Problem) -> Statement? {
            while true {
                skipBlank()
                skipComment()
                guard let c = peek else { return nil }
                if c == "\n" || c == "\r" {
                    i += 1
                    continue
                }
                if c == "[" { return .table(try tableHeader()) }
                let key = try keyParts()
                skipBlank()
                guard peek == "=" else { throw Problem(problem: "a key without = on line \(lineNumber)") }
                i += 1
                skipBlank()
                let value = try self.value()
                try endLine()
                return .pair(key, value)
            }
        }

        mutating func keyParts() throws(Problem) -> [String] {
            var parts: [String] = []
            while true {
                skipBlank()
                if peek == "\"" || peek == "'" {
                    guard case .string(let part) = try string() else {
                        throw Problem(problem: "a bad key on line \(lineNumber)")
                    }
                    parts.append(part)
                } else {
                    var part = ""
                    while let c = peek, c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-" {
                        part.unicodeScalars.append(c)
                        i += 1
                    }
                    guard !part.isEmpty else { throw Problem(problem: "a bad key on line \(lineNumber)") }
                    parts.append(part)
                }
                skipBlank()
                guard peek == "." else { return parts }
                i += 1
            }
        }

        /// `[name]` or `[[name]]` up to the end of its line: the name, nil for an array of tables.
        mutating func tableHeader() throws(Problem) -> [String]? {
            let array = peek("[[")
            i += array ? 2 : 1
            let name = try keyParts()
            guard array ? peek("]]") : peek == "]" else {
                throw Problem(problem: "a table header is not closed on line \(lineNumber)")
            }
            i += array ? 2 : 1
            try endLine()
            return array ? nil : name
        }

        /// A value: a string or a boolean is returned; anything else is skipped (nil).
        mutating func value() throws(Problem) -> Value? {
            guard let c = peek else { throw Problem(problem: "a key without a value on line \(lineNumber)") }
            if c == "\"" || c == "'" { return try string() }
            for (word, flag) in [("true", true), ("false", false)] where peek(word) {
                let after = i + word.unicodeScalars.count
                if after == s.count || [" ", "\t", "\r", "\n", "#", ",", "]", "}"].contains(s[after]) {
                    i = after
                    return .boolean(flag)
                }
            }
            if c == "[" || c == "{" {
                try skipNested()
                return nil
            }
            // Numbers, booleans, dates: up to the end of the line or a comment.
            while let c = peek, c != "\n", c != "#" { i += 1 }
            return nil
        }

        /// Skips an array or inline table, which may span lines and hold strings and comments.
        mutating func skipNested() throws(Problem) {
            var depth = 0
            repeat {
                guard let c = peek else { throw Problem(problem: "an array or inline table is not closed") }
                switch c {
                case "[", "{":
                    depth += 1
                    i += 1
                case "]", "}":
                    depth -= 1
                    i += 1
                case "\"", "'": _ = try string()
                case "#": skipComment()
                default: i += 1
                }
            } while depth > 0
        }

        mutating func string() throws(Problem) -> Value {
            let quote = s[i]
            let multi = peek(String(quote) + String(quote) + String(quote))
            i += multi ? 3 : 1
            if multi, peek == "\n" { i += 1 } else if multi, peek("\r\n") { i += 2 }
            var out = ""
            while true {
                guard let c = peek else { throw Problem(problem: "a string is not closed") }
                if multi ? peek(String(quote) + String(quote) + String(quote)) : c == quote {
                    i += multi ? 3 : 1
                    // A multi-line string may end with up to two more quotes of its own.
                    while multi, peek == quote {
                        out.unicodeScalars.append(quote)
                        i += 1
                    }
                    return .string(out)
                }
                if !multi && c == "\n" { throw Problem(problem: "a string is not closed on line \(lineNumber)") }
                if c == "\\" && quote == "\"" {
                    i += 1
                    guard let e = peek else { throw Problem(problem: "a string is not closed") }
                    i += 1
                    switch e {
                    case "n": out += "\n"
                    case "t": out += "\t"
                    case "r": out += "\r"
                    case "\"": out += "\""
                    case "\\": out += "\\"
                    case "b": out += "\u{8}"
                    case "f": out += "\u{c}"
                    case "u", "U":
                        let n = e == "u" ? 4 : 8
                        guard i + n <= s.count,
                            let v = UInt32(String(String.UnicodeScalarView(s[i..<i + n])), radix: 16),
                            let scalar = Unicode.Scalar(v)
                        else { throw Problem(problem: "a bad escape on line \(lineNumber)") }
                        out.unicodeScalars.append(scalar)
                        i += n
                    case "\n", " ", "\t", "\r":
                        // A line-ending backslash (multi-line strings only): the white space up
                        // to the next text goes.
                        guard multi else { throw Problem(problem: "a bad escape on line \(lineNumber)") }
                        while let w = peek, w == " " || w == "\t" || w == "\n" || w == "\r" { i += 1 }
                    default: throw Problem(problem: "a bad escape on line \(lineNumber)")
                    }
                    continue
                }
                out.unicodeScalars.append(c)
                i += 1
            }
        }
    }
}
