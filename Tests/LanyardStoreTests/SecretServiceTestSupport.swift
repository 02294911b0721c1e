// Helpers for the Secret Service tests: the keyring guard, sample credentials, running tools
// (secret-tool, gdbus, python3-dbus), private buses and gnome-keyring daemons, and re-running
// this test binary as a child process in another D-Bus environment.

import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

enum KeyringTestError: Error, CustomStringConvertible {
    case tool(String)
    var description: String {
        switch self {
        case .tool(let s): return s
        }
    }
}

/// The collection the test keyring stores into: gnome-keyring's `login`, or the one KeePassXC
/// serves for its open database (scripts/with-keepassxc.sh says which).
let loginCollection =
    ProcessInfo.processInfo.environment["LANYARD_TEST_KEYRING_COLLECTION"]
    ?? "/org/freedesktop/secrets/collection/login"

/// A slot name no other test uses.
func uniqueSlot(_ prefix: String) -> Slot {
    let suffix = UUID().uuidString.prefix(8).lowercased()
    // Prefixes are literals chosen to be valid slot names.
    return try! Slot("\(prefix)-\(suffix)")
}

/// A credential whose tokens carry `marker`, so tests can tell versions apart.
func sampleCredential(
    _ marker: String,
    provider: String = "openai",
    accountID: String? = "acct-1",
    email: String? = "alice@example.com"
) -> Credential {
    Credential(
        provider: provider,
        tokens: TokenSet(
            accessToken: "access-\(marker)",
            refreshToken: "refresh-\(marker)",
            idToken: "id-\(marker)",
            expiresAt: Date(timeIntervalSince1970: 1_900_000_000)
        ),
        lastRefresh: Date(timeIntervalSince1970: 1_800_000_000),
        account: AccountInfo(email: email, userID: "user-1", accountID: accountID, plan: Plan(rawValue: "pro"))
    )
}

/// Seconds taken by `body`.
func timed<T>(_ body: () throws -> T) rethrows -> (T, TimeInterval) {
    let start = DispatchTime.now()
    let value = try body()
    return (value, Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9)
}

/// The StoreError thrown by `body`, or nil (recorded as an issue) when it threw nothing or something else.
func storeError<T>(
    _ body: () throws -> T,
    sourceLocation: SourceLocation = #_sourceLocation
) -> (StoreError?, TimeInterval) {
    let start = DispatchTime.now()
    let error: StoreError?
    do {
        _ = try body()
        Issue.record("expected a StoreError, but the call succeeded", sourceLocation: sourceLocation)
        error = nil
    } catch let e as StoreError {
        error = e
    } catch {
        Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
        return (nil, 0)
    }
    return (error, Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9)
}

extension StoreError {
    var isLocked: Bool {
        if case .locked = self { return true }
        return false
    }
    var isUnavailable: Bool {
        if case .unavailable = self { return true }
        return false
    }
    var isTimedOut: Bool {
        if case .timedOut = self { return true }
        return false
    }
    var isNotFound: Bool {
        if case .notFound = self { return true }
        return false
    }
    var hint: String {
        switch self {
        case .unavailable(_, let hint, _), .locked(_, let hint): return hint
        default: return ""
        }
    }
}

// MARK: - Running tools

struct ToolResult {
    var status: Int32
    var stdout: Data
    var stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs a program (looked up in PATH unless absolute), feeding `stdin` (secrets go there, never
/// into argv), and waits for it.
@discardableResult
func runTool(
    _ program: String,
    _ arguments: [String],
    stdin: Data? = nil,
    environment: [String: String]? = nil,
    timeout: TimeInterval = 30
) throws -> ToolResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
    process.arguments = program.hasPrefix("/") ? arguments : [program] + arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    let errors = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = input
    try process.run()
    // Read both pipes on their own threads so a chatty child cannot fill one and block.
    let group = DispatchGroup()
    nonisolated(unsafe) var out = Data()
    nonisolated(unsafe) var err = Data()
    DispatchQueue.global().async(group: group) { out = output.fileHandleForReading.readDataToEndOfFile() }
    DispatchQueue.global().async(group: group) { err = errors.fileHandleForReading.readDataToEndOfFile() }
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try input.fileHandleForWriting.close()
    if group.wait(timeout: .now() + timeout) == .timedOut {
        process.terminate()
        throw KeyringTestError.tool("\(program) \(arguments.joined(separator: " ")) did not finish in \(timeout) s")
    }
    process.waitUntilExit()
    return ToolResult(status: process.terminationStatus, stdout: out, stderr: String(decoding: err, as: UTF8.self))
}

enum SecretTool {
    /// `secret-tool search --all` output for the slot, one dictionary per item
    /// (`label`, `secret`, `schema`, `attribute.slot`, …).
    static func search(slot: Slot) throws -> [[String: String]] {
        let result = try runTool(
            "secret-tool",
            [
                "search", "--all", "xdg:schema", SecretServiceStore.schemaName,
                "slot", slot.name,
            ]
        )
        var items: [[String: String]] = []
        for line in result.text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("[") {
                items.append([:])
                continue
            }
            guard let eq = line.range(of: " = "), !items.isEmpty else { continue }
            items[items.count - 1][String(line[..<eq.lowerBound])] = String(line[eq.upperBound...])
        }
        // secret-tool prints `attribute.NAME = VALUE` lines on stderr, so they can only be matched
        // to their item when there is exactly one.
        if items.count == 1 {
            for line in result.stderr.split(separator: "\n") where line.hasPrefix("attribute.") {
                let parts = line.split(separator: "=", maxSplits: 1)
                let value = parts.count == 2 ? String(parts[1].dropFirst()) : ""
                items[0][parts[0].trimmingCharacters(in: .whitespaces)] = value
            }
        }
        return items
    }

    /// The raw secret `secret-tool lookup` prints, or nil when it finds nothing.
    static func lookup(slot: Slot) throws -> Data? {
        let result = try runTool(
            "secret-tool",
            ["lookup", "xdg:schema", SecretServiceStore.schemaName, "slot", slot.name]
        )
        return result.status == 0 ? result.stdout : nil
    }

    /// Stores `secret` (from stdin) under the Lanyard attributes, as another program would.
    static func store(slot: Slot, provider: String, accountID: String, secret: Data, label: String = "hand-made") throws
    {
        let result = try runTool(
            "secret-tool",
            [
                "store", "--label", label, "xdg:schema", SecretServiceStore.schemaName,
                "slot", slot.name, "provider", provider, "account-id", accountID,
            ],
            stdin: secret
        )
        guard result.status == 0 else { throw KeyringTestError.tool("secret-tool store failed: \(result.stderr)") }
    }
}

// MARK: - Locking the shared test keyring

enum TestKeyring {
    /// Locks the login collection with the Secret Service's own Lock call over gdbus
    /// (`secret-tool lock` crashes in Debian 12's version).
    /// KeePassXC answers Lock with a prompt that does the locking when it is run (no dialog);
    /// KWallet closes the wallet at once (no prompt).
    static func lockLogin() throws {
        let result = try runTool(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets",
                "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", "['\(loginCollection)']",
            ]
        )
        guard result.status == 0 else { throw KeyringTestError.tool("lock failed: \(result.stderr)") }
        // The reply is `([locked paths], prompt)`; "/" means no prompt.
        if let prompt = result.text.split(separator: "'").map(String.init).last(where: { $0.contains("/prompt/") }) {
            let run = try runTool(
                "gdbus",
                [
                    "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", prompt,
                    "--method", "org.freedesktop.Secret.Prompt.Prompt", "",
                ]
            )
            guard run.status == 0 else { throw KeyringTestError.tool("running the lock prompt failed: \(run.stderr)") }
            // The prompt completes asynchronously: wait for the collection to say so.
            try eventually("the login collection is locked") {
                try isLoginLocked()
            } until: {
                $0
            }
        }
    }

    /// Unlocks the login collection without a prompt (there is no display): gnome-keyring's
    /// UnlockWithMasterPassword over a "plain" session, from python3-dbus. The password goes
    /// through stdin.
    static func unlockLogin() throws {
        if testKeyringIsKeePassXC { return try unlockKeePassXC() }
        if testKeyringIsKWallet { return try unlockKWallet() }
        let script = """
            import sys, dbus
            pw = sys.stdin.buffer.read()
            bus = dbus.SessionBus()
            svc = bus.get_object('org.freedesktop.secrets', '/org/freedesktop/secrets')
            _, session = svc.OpenSession('plain', dbus.String('', variant_level=1),
                                         dbus_interface='org.freedesktop.Secret.Service')
            internal = dbus.Interface(svc, 'org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface')
            internal.UnlockWithMasterPassword(dbus.ObjectPath(sys.argv[1]),
                dbus.Struct((session, dbus.ByteArray(b''), dbus.ByteArray(pw), 'text/plain'), signature='oayays'))
            """
        let password = ProcessInfo.processInfo.environment["LANYARD_TEST_KEYRING_PASSWORD"] ?? ""
        let result = try runTool("/usr/bin/python3", ["-c", script, loginCollection], stdin: Data(password.utf8))
        guard result.status == 0 else { throw KeyringTestError.tool("unlock failed: \(result.stderr)") }
    }

    /// KeePassXC unlocks only through its own interface (a Secret Service unlock opens a dialog
    /// nobody can see): `openDatabase(path, password)`, the password through stdin.
    static func unlockKeePassXC() throws {
        let script = """
            import sys, dbus
            pw = sys.stdin.read()
            bus = dbus.SessionBus()
            window = bus.get_object('org.keepassxc.KeePassXC.MainWindow', '/keepassxc')
            dbus.Interface(window, 'org.keepassxc.KeePassXC.MainWindow').openDatabase(sys.argv[1], pw, signature='ss')
            """
        let environment = ProcessInfo.processInfo.environment
        let result = try runTool(
            "/usr/bin/python3",
            ["-c", script, environment["LANYARD_TEST_KEEPASSXC_DB"] ?? ""],
            stdin: Data((environment["LANYARD_TEST_KEYRING_PASSWORD"] ?? "").utf8)
        )
        guard result.status == 0 else { throw KeyringTestError.tool("unlock failed: \(result.stderr)") }
        try eventually("the KeePassXC database is unlocked") {
            try !isLoginLocked()
        } until: {
            $0
        }
    }

    /// KWallet asks for the wallet password with a dialog nobody can see when a Secret Service
    /// unlock finds the wallet closed: scripts/lib/kwallet-open.py opens it first with pamOpen (the
    /// key derived from the password, as pam_kwallet5 does) and then runs the Unlock prompt, which
    /// completes without a dialog. The password goes through stdin.
    static func unlockKWallet() throws {
        let environment = ProcessInfo.processInfo.environment
        let helper = try #require(environment["LANYARD_TEST_KWALLET_OPEN"], "run under scripts/with-kwallet.sh")
        let wallet = try #require(environment["LANYARD_TEST_KWALLET_WALLET"], "run under scripts/with-kwallet.sh")
        let result = try runTool(
            "/usr/bin/python3",
            [helper, wallet, loginCollection],
            stdin: Data((environment["LANYARD_TEST_KEYRING_PASSWORD"] ?? "").utf8)
        )
        guard result.status == 0 else { throw KeyringTestError.tool("unlock failed: \(result.stderr)") }
    }

    static func isLoginLocked() throws -> Bool {
        let result = try runTool(
            "gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets",
                "--object-path", loginCollection, "--method",
                "org.freedesktop.DBus.Properties.Get",
                "org.freedesktop.Secret.Collection", "Locked",
            ]
        )
        return result.text.contains("true")
    }
}

// MARK: - Private buses, daemons and child runs

/// A scratch directory removed on deinit.
final class ScratchDirectory {
    let path: String
    init(_ name: String) throws {
        let template = NSTemporaryDirectory() + "lanyard-\(name).XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw KeyringTestError.tool("mkdtemp failed") }
        path = String(cString: made)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func subdirectory(_ name: String) throws -> String {
        let dir = path + "/" + name
        try FileManager.default.createDirectory(
            atPath: dir,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return dir
    }
}

/// A throwaway HOME / XDG layout with nothing in it, for child processes.
func isolatedEnvironment(in scratch: ScratchDirectory) throws -> [String: String] {
    var env: [String: String] = [:]
    env["PATH"] = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    env["HOME"] = try scratch.subdirectory("home")
    env["XDG_CONFIG_HOME"] = try scratch.subdirectory("config")
    env["XDG_DATA_HOME"] = try scratch.subdirectory("data")
    env["XDG_CACHE_HOME"] = try scratch.subdirectory("cache")
    env["XDG_RUNTIME_DIR"] = try scratch.subdirectory("runtime")
    env["TMPDIR"] = try scratch.subdirectory("tmp")
    return env
}

/// Re-runs one test of this binary in a child process with `environment`: the child's session bus
/// (or its absence) is fixed when libsecret first connects, so other D-Bus setups need their own
/// process. The child test is enabled only by LANYARD_STORE_PROBE. Returns the child's output.
func runChildTest(_ testName: String, environment: [String: String], timeout: TimeInterval = 60) throws -> ToolResult {
    let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    var env = environment
    env["LANYARD_STORE_PROBE"] = testName
    let result = try runTool(
        executable,
        [
            "--testing-library", "swift-testing", "--filter",
            "SecretServiceChildTests/\(testName)",
        ],
        environment: env,
        timeout: timeout
    )
    return result
}

/// The line a child test prints when it ran to its end.
func childDoneMarker(_ testName: String) -> String { "lanyard-child-test-done: \(testName)" }
