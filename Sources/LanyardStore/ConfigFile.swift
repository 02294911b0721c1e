import FoundationEssentials
import Glibc
import LanyardCore
import LanyardGLib
import LanyardSupport

/// Reads config.ini, a GLib key file (through LanyardGLib's `KeyFile`). Unknown groups and keys give
/// warnings; a file that does not parse or a value that makes no sense gives a ``ConfigError``
/// naming the line or the key.
package enum ConfigFile {
    /// The result of loading: settings plus warnings for people.
    package struct Loaded: Sendable {
        package var config: LanyardConfig
        package var warnings: [String]
    }

    /// Loads `path`; a missing file gives the defaults.
    package static func load(path: String) throws -> Loaded {
        guard let data = try SecureFiles.readUserFile(path) else {
            return Loaded(config: LanyardConfig(), warnings: [])
        }
        return try parse(data, path: path)
    }

    /// Parses config text (no I/O). Groups are checked first (unknown keys and groups are warnings;
    /// `[git]` and `[provider.*]` are read there), then each known section in turn.
    package static func parse(_ data: Data, path: String) throws(ConfigError) -> Loaded {
        let text = String(decoding: data, as: UTF8.self)
        let file = KeyFile()
        do { try file.load(text) } catch {
            throw .malformed(path: path, line: line(of: error.message, in: text), detail: error.message)
        }
        let reader = Reader(file: file, path: path, text: text)
        var config = LanyardConfig()
        do {
            let warnings = try readGroups(reader, into: &config)
            try readStore(reader, into: &config)
            try readRefresh(reader, into: &config)
            try readBackoff(reader, into: &config)
            try readLoginHTTPAndIntegrations(reader, into: &config)
            try readAgentAndEvents(reader, into: &config)
            try readStream(reader, into: &config)
            try readSwitch(reader, into: &config)
            try readDesktop(reader, into: &config)
            try readFleet(reader, into: &config)
            return Loaded(config: config, warnings: warnings + commentWarnings(reader))
        } catch {
            throw located(error, reader)
        }
    }

    /// The hint for a value with a `#` after it: GLib starts a comment only at the beginning of a
    /// line, so `backend = file # comment` reads as the value `file # comment`.
    static let commentHint = "a # after a value is part of the value (config.ini comments take their own line)"

    /// Whether a value holds a `#` after a space: what a comment written after the value looks like.
    static func hasTrailingComment(_ value: String) -> Bool {
        value.contains(" #") || value.contains("\t#")
    }

    /// `error` with the line of its key (or group) and, when the value looks like it ends in a
    /// comment, the hint that comments take their own line.
    private static func located(_ error: ConfigError, _ r: Reader) -> ConfigError {
        guard case .invalidValue(let path, let group, let key, var detail, nil) = error else { return error }
        if !key.isEmpty, let raw = r.string(group, key), hasTrailingComment(raw) { detail += "; " + commentHint }
        return .invalidValue(
            path: path,
            group: group,
            key: key,
            detail: detail,
            line: r.line(group, key.isEmpty ? nil : key)
        )
    }

    /// Values that were accepted but hold what looks like a comment (`hook = notify-send # later`):
    /// warned about, since the `#` and what follows are part of the value.
    private static func commentWarnings(_ r: Reader) -> [String] {
        var warnings: [String] = []
        for group in r.file.groups() {
            for key in r.file.keys(group) {
                guard let raw = r.string(group, key), hasTrailingComment(raw) else { continue }
                warnings.append("\(r.location(group, key)): [\(group)] \(key) is \"\(raw)\": \(commentHint)")
            }
        }
        return warnings.map { TerminalText.escaped($0) }
    }

    /// The keys each fixed section knows; others are warned about.
    static let knownKeys: [String: Set<String>] = [
        "store": ["backend", "timeout", "interactive-timeout", "unlock-cache", "collection", "tpm-tcti"],
        "refresh": ["lead", "lead-share", "max-age"],
        "backoff": ["max-retries", "initial-delay", "maximum-delay", "respect-retry-after"],
        "integrations": ["codex"],
        "login": ["slow-down-increment", "timeout"],
        "http": ["timeout"],
        "agent": ["jitter", "hook", "notify"],
        "events": ["max-bytes"],
        "stream": ["transport", "reconnect-attempts", "fallback", "model"],
        "switch": ["auto", "threshold", "poll"],
        "desktop": ["notify", "label"],
        "fleet": ["name", "machine", "endpoints", "ca", "cert", "key", "user", "password-file", "lock-ttl", "timeout"],
    ]

    /// The providers Lanyard knows without a `type` (`[provider.openai]` only changes what it sets).
    static let builtInProviders = ["openai", "github"]

    /// `; did you mean "KEY"?` for a key close to one of `known`, else nothing.
    private static func suggestion(_ key: String, in known: Set<String>) -> String {
        Suggest.closest(to: key, in: known.sorted()).map { "; did you mean \"\($0)\"?" } ?? ""
    }

    /// The keys of a `[provider.ID]` section (besides `env.NAME`).
    static let providerKeys: Set<String> = [
        "type", "issuer", "client-id", "scopes", "plan-claim", "account-claim", "device-authorization-endpoint",
        "authorization-endpoint",
        "token-endpoint", "revocation-endpoint", "usage-base-url", "usage-page-url", "tokens-page-url", "git-username",
        "kube-token",
    ]

    /// Typed reads of one key file, each failing with a ``ConfigError`` that names the key.
    struct Reader {
        let file: KeyFile
        let path: String
        /// The file's text, for line numbers (GLib's key file keeps none).
        let text: String

        func string(_ group: String, _ key: String) -> String? { file.string(group, key) }

        /// The 1-based line of `key` in `[group]` (of the group's first header when `key` is nil):
        /// for a key written twice the last one, whose value GLib keeps.
        func line(_ group: String, _ key: String?) -> Int? {
            var current: String?
            var found: Int?
            for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = raw.trimmingSpaces()
                if line.isEmpty || line.hasPrefix("#") { continue }
                if line.hasPrefix("[") {
                    current = line.hasSuffix("]") ? String(line.dropFirst().dropLast()) : nil
                    if key == nil && current == group { return n + 1 }
                } else if let key, current == group, let equals = line.firstIndex(of: "="),
                    line[..<equals].trimmingSpaces() == key
                {
                    found = n + 1
                }
            }
            return found
        }

        /// `path:LINE` (or `path` when the line is not found), to start a warning with.
        func location(_ group: String, _ key: String?) -> String {
            "\(path)\(line(group, key).map { ":\($0)" } ?? "")"
        }

        /// A number from `min` to `max`: 10⁹ unless a key says otherwise (about 31 years in
        /// seconds; larger values would overflow the nanoseconds a wait is given in).
        func number(_ group: String, _ key: String, min: Double = 0, max: Double = 1e9) throws(ConfigError) -> Double? {
            guard let raw = file.string(group, key) else { return nil }
            guard let v = Double(raw.trimmingSpaces()), v >= min, v <= max else {
                func text(_ bound: Double) -> String { bound == bound.rounded() ? String(Int(bound)) : String(bound) }
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "expected a number from \(text(min)) to \(text(max)), got \"\(raw)\""
                )
            }
            return v
        }

        func bool(_ group: String, _ key: String) throws(ConfigError) -> Bool? {
            guard let raw = file.string(group, key) else { return nil }
            switch raw.trimmingSpaces().lowercased() {
            case "true", "yes", "1", "on": return true
            case "false", "no", "0", "off": return false
            default:
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "expected true or false, got \"\(raw)\""
                )
            }
        }

        func url(_ group: String, _ key: String) throws(ConfigError) -> URL? {
            guard let raw = file.string(group, key) else { return nil }
            guard let u = URL(string: raw.trimmingSpaces()), let scheme = u.scheme,
                ["http", "https"].contains(scheme.lowercased()), u.host != nil
            else {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "expected an http(s) URL, got \"\(raw)\""
                )
            }
            // Every provider URL carries tokens: plain http would send them across the network in
            // clear, so it is only for a server on this machine (tests, a local proxy).
            if scheme.lowercased() == "http" && !Loopback.isLoopback(host: u.host ?? "") {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "plain http is only allowed to this machine (localhost, 127.0.0.1, ::1); use https"
                )
            }
            return u
        }

        func invalid(_ group: String, _ key: String, _ detail: String) -> ConfigError {
            .invalidValue(path: path, group: group, key: key, detail: detail)
        }
    }

    /// Walks every group: warns about unknown groups and keys, reads `[git]` and `[provider.*]`.
    private static func readGroups(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) -> [String] {
        var warnings: [String] = []
        for group in r.file.groups() {
            if let keys = knownKeys[group] {
                for key in r.file.keys(group) where !keys.contains(key) {
                    warnings.append(
                        "\(r.location(group, key)): unknown key \"\(key)\" in "
                            + "[\(group)] (ignored\(suggestion(key, in: keys)))"
                    )
                }
            } else if group == "git" {
                try readGit(r, into: &config)
            } else if group == "docker" {
                config.dockerCredentials = try readHosts(r, group: group)
            } else if group == "netrc" {
                config.netrcCredentials = try readHosts(r, group: group)
            } else if group.hasPrefix("provider.") {
                let id = String(group.dropFirst("provider.".count))
                for key in r.file.keys(group) where !providerKeys.contains(key) && !key.hasPrefix("env.") {
                    warnings.append(
                        "\(r.location(group, key)): unknown key \"\(key)\" in "
                            + "[\(group)] (ignored\(suggestion(key, in: providerKeys)))"
                    )
                }
                config.providers[id] = try provider(id: id, group: group, r)
            } else {
                let known =
                    Array(knownKeys.keys) + ["git", "docker", "netrc"] + builtInProviders.map { "provider.\($0)" }
                let hint = Suggest.closest(to: group, in: known.sorted()).map { "; did you mean [\($0)]?" } ?? ""
                warnings.append("\(r.location(group, nil)): unknown group [\(group)] (ignored\(hint))")
            }
        }
        // Group and key names come from the file: shown with control characters escaped.
        return warnings.map { TerminalText.escaped($0) }
    }

    /// `[docker]` and `[netrc]`: HOST[:PORT] = SLOT.
    private static func readHosts(_ r: Reader, group: String) throws(ConfigError) -> [String: Slot] {
        var hosts: [String: Slot] = [:]
        for key in r.file.keys(group) {
            let raw = (r.string(group, key) ?? "").trimmingSpaces()
            guard let slot = try? Slot(raw) else { throw r.invalid(group, key, "expected a slot name, got \"\(raw)\"") }
            guard let host = hostKey(key) else {
                throw r.invalid(group, key, "expected HOST or HOST:PORT (like ghcr.io), without a scheme or path")
            }
            hosts[host] = slot
        }
        return hosts
    }

    /// A `[docker]`/`[netrc]` key in canonical form: the lowercased host with `:PORT`; nil when it
    /// has a scheme, a path or spaces.
    package static func hostKey(_ key: String) -> String? {
        let host = key.trimmingSpaces().lowercased()
        guard !host.isEmpty, !host.contains("/"),
            !host.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
            })
        else {
            return nil
        }
        return host
    }

    /// `[git]`: HOST[/PATH] = SLOT.
    private static func readGit(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        for key in r.file.keys("git") {
            let raw = (r.string("git", key) ?? "").trimmingSpaces()
            guard let slot = try? Slot(raw) else { throw r.invalid("git", key, "expected a slot name, got \"\(raw)\"") }
            guard let pattern = gitPattern(key) else {
                throw r.invalid("git", key, "expected HOST or HOST/PATH (like github.com or github.com/org)")
            }
            config.gitCredentials[pattern] = slot
        }
    }

    /// `[store]`: backend, timeouts, unlock cache, keyring collection, the TPM's TCTI.
    private static func readStore(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let raw = r.string("store", "backend") {
            guard let choice = LanyardConfig.BackendChoice(rawValue: raw.trimmingSpaces()) else {
                throw r.invalid("store", "backend", "expected auto, secret-service or file, got \"\(raw)\"")
            }
            config.backend = choice
        }
        if let v = try r.number("store", "timeout", min: 0.1) { config.storeTimeout = v }
        if let v = try r.number("store", "interactive-timeout", min: 0.1) { config.interactiveStoreTimeout = v }
        if let v = try r.number("store", "unlock-cache") { config.unlockCacheSeconds = v }
        if let raw = r.string("store", "collection") {
            let v = raw.trimmingSpaces()
            guard !v.isEmpty, !v.contains(where: \.isWhitespace) else {
                throw r.invalid(
                    "store",
                    "collection",
                    "expected an alias (default, login, session) or a collection's object path, got \"\(raw)\""
                )
            }
            config.keyringCollection = v
        }
        if let raw = r.string("store", "tpm-tcti") {
            let v = raw.trimmingSpaces()
            guard !v.isEmpty, !v.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw r.invalid(
                    "store",
                    "tpm-tcti",
                    "expected a TCTI as tpm2-tools take it (device:/dev/tpmrm0, swtpm:host=HOST,port=PORT)"
                )
            }
            config.tpmTCTI = v
        }
    }

    /// `[refresh]`: lead, lead-share and max-age.
    private static func readRefresh(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let v = try r.number("refresh", "lead") { config.refreshLead = v }
        if let v = try r.number("refresh", "lead-share", min: 0.01, max: 1) { config.refreshLeadShare = v }
        if let v = try r.number("refresh", "max-age", min: 60) { config.refreshMaxAge = v }
    }

    /// `[backoff]`: the 429 policy.
    private static func readBackoff(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let v = try r.number("backoff", "max-retries") { config.backoff.maxRetries = Int(v) }
        if let v = try r.number("backoff", "initial-delay") { config.backoff.initialDelay = v }
        if let v = try r.number("backoff", "maximum-delay") { config.backoff.maximumDelay = v }
        if let v = try r.bool("backoff", "respect-retry-after") { config.backoff.respectsRetryAfterHeader = v }
    }

    /// `[integrations]`, `[login]` and `[http]`.
    private static func readLoginHTTPAndIntegrations(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError)
    {
        if let v = try r.bool("integrations", "codex") { config.codexIntegration = v }
        if let v = try r.number("login", "slow-down-increment") { config.slowDownIncrement = v }
        if let v = try r.number("login", "timeout", min: 1) { config.loginTimeout = v }
        if let v = try r.number("http", "timeout", min: 0.1) { config.httpTimeout = v }
    }

    /// `[agent]` and `[events]`.
    private static func readAgentAndEvents(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let v = try r.number("agent", "jitter") { config.agentJitter = v }
        if let v = r.string("agent", "hook")?.trimmingSpaces(), !v.isEmpty { config.agentHook = v }
        if let v = try r.bool("agent", "notify") { config.agentNotify = v }
        if let v = try r.number("events", "max-bytes", min: 4096, max: 1e15) { config.eventsMaxBytes = Int(v) }
    }

    /// `[stream]`: the streaming transport policy and the model `lanyard ask` uses.
    private static func readStream(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let raw = r.string("stream", "transport") {
            switch raw.trimmingSpaces().lowercased() {
            case "websocket": config.streaming.prefersWebSocket = true
            case "sse":
                config.streaming.prefersWebSocket = false
                config.streaming.maxWebSocketReconnectionAttempts = 0
            default: throw r.invalid("stream", "transport", "expected websocket or sse, got \"\(raw)\"")
            }
        }
        if let v = try r.number("stream", "reconnect-attempts") {
            guard v <= 100, v == v.rounded() else {
                throw r.invalid("stream", "reconnect-attempts", "expected a whole number from 0 to 100")
            }
            config.streaming.maxWebSocketReconnectionAttempts = Int(v)
        }
        if let v = try r.bool("stream", "fallback") { config.streaming.fallsBackToHTTPSSE = v }
        if let raw = r.string("stream", "model") {
            let v = raw.trimmingSpaces()
            guard !v.isEmpty, v.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw r.invalid("stream", "model", "expected a model name without spaces")
            }
            config.streamModel = v
        }
    }

    /// `[switch]`: the agent's usage-aware switching (`auto`, `threshold`, `poll`).
    private static func readSwitch(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let raw = r.string("switch", "auto") {
            guard let mode = AutoSwitchPolicy.Mode(rawValue: raw.trimmingSpaces().lowercased()) else {
                throw r.invalid("switch", "auto", "expected off or usage, got \"\(raw)\"")
            }
            config.autoSwitch.mode = mode
        }
        if let v = try r.number("switch", "threshold", min: 1, max: 100) { config.autoSwitch.threshold = v }
        // Below 60 s only counts against a usage endpoint on this machine (pollInterval(usageBaseURL:)).
        if let v = try r.number("switch", "poll", min: 1, max: 86_400) { config.autoSwitch.poll = v }
    }

    /// `[desktop]`: `notify`, the percentages at which `lanyard tray` warns (`80, 95`; `off` or
    /// empty: never). Ascending, so a list written out of order is a mistake said, not sorted.
    private static func readDesktop(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        if let raw = r.string("desktop", "label") {
            guard let label = DesktopLabel(rawValue: raw.trimmingSpaces().lowercased()) else {
                throw r.invalid("desktop", "label", "expected percent, slot or off, got \"\(raw)\"")
            }
            config.desktopLabel = label
        }
        guard let raw = r.string("desktop", "notify") else { return }
        let text = raw.trimmingSpaces()
        if text.isEmpty || text.lowercased() == "off" {
            config.desktopNotifyPercents = []
            return
        }
        var percents: [Int] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = String(String(part).filter { $0 != "%" }).trimmingSpaces()
            guard let v = Int(item), (1...100).contains(v) else {
                throw r.invalid(
                    "desktop",
                    "notify",
                    "expected off or percentages from 1 to 100 separated by commas (80, 95), got \"\(raw)\""
                )
            }
            guard percents.last.map({ $0 < v }) ?? true else {
                throw r.invalid(
                    "desktop",
                    "notify",
                    "expected percentages in ascending order without repeats (80, 95), got \"\(raw)\""
                )
            }
            percents.append(v)
        }
        config.desktopNotifyPercents = percents
    }

    /// `[fleet]`: the etcd cluster slots are shared through. `name` and `endpoints` are required
    /// once the group exists; an endpoint without a scheme is https, and plain http must be written.
    private static func readFleet(_ r: Reader, into config: inout LanyardConfig) throws(ConfigError) {
        guard r.file.groups().contains("fleet") else { return }
        func slotLike(_ key: String, _ raw: String) throws(ConfigError) -> String {
            let v = raw.trimmingSpaces()
            guard (try? Slot(v)) != nil else {
                throw r.invalid("fleet", key, "expected a name of a-z, 0-9, . _ - (at most 64), got \"\(raw)\"")
            }
            return v
        }
        guard let rawName = r.string("fleet", "name") else {
            throw r.invalid("fleet", "name", "missing (the fleet's name, shared by its machines)")
        }
        let name = try slotLike("name", rawName)
        let machine =
            try r.string("fleet", "machine").map { raw throws(ConfigError) in try slotLike("machine", raw) }
            ?? FleetMachineName.fromHost()
        guard let rawEndpoints = r.string("fleet", "endpoints") else {
            throw r.invalid("fleet", "endpoints", "missing (etcd client URLs, comma-separated: https://host:2379)")
        }
        var endpoints: [String] = []
        for part in rawEndpoints.split(separator: ",") {
            var e = String(part).trimmingSpaces()
            if e.isEmpty { continue }
            // `endpoints = https://a:2379 https://b:2379`: a list written as etcdctl takes it on a
            // command line. (A `#` means a comment, which `located` explains instead.)
            let words = e.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.count > 1 && !e.contains("#") {
                throw r.invalid(
                    "fleet",
                    "endpoints",
                    "endpoints are separated by commas, not spaces: endpoints = \(words.joined(separator: ", "))"
                )
            }
            if !e.contains("://") { e = "https://" + e }
            guard let u = URL(string: e), let scheme = u.scheme?.lowercased(), ["http", "https"].contains(scheme),
                u.host != nil,
                e.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw r.invalid("fleet", "endpoints", "expected https://HOST:PORT URLs, got \"\(part)\"")
            }
            // etcd's password goes with user and password-file, never in a URL (where it would be
            // shown in this message and in every other one that names the endpoint).
            guard u.user == nil, u.password == nil else {
                throw r.invalid(
                    "fleet",
                    "endpoints",
                    "an endpoint holds no user name or password (set user and password-file)"
                )
            }
            // The etcd password, the token etcd gives for it and every sealed credential travel to
            // the endpoint: plain http only to this machine, where nothing crosses a network.
            if scheme == "http" && !Loopback.isLoopback(host: u.host ?? "") {
                throw r.invalid(
                    "fleet",
                    "endpoints",
                    "\"\(e)\" is plain http, which is only allowed to this machine "
                        + "(localhost, 127.0.0.1, ::1); use https"
                )
            }
            while e.hasSuffix("/") { e.removeLast() }
            endpoints.append(e)
        }
        guard !endpoints.isEmpty else { throw r.invalid("fleet", "endpoints", "no endpoint given") }
        var fleet = FleetSettings(name: name, machine: machine, endpoints: endpoints)
        func file(_ key: String) -> String? {
            guard let v = r.string("fleet", key)?.trimmingSpaces(), !v.isEmpty else { return nil }
            return v.hasPrefix("~/") ? (ProcessInfo.processInfo.environment["HOME"] ?? "") + v.dropFirst(1) : v
        }
        fleet.caFile = file("ca")
        fleet.certFile = file("cert")
        fleet.keyFile = file("key")
        guard (fleet.certFile == nil) == (fleet.keyFile == nil) else {
            throw r.invalid(
                "fleet",
                fleet.certFile == nil ? "cert" : "key",
                "cert and key go together (the TLS client certificate and its key)"
            )
        }
        fleet.user = r.string("fleet", "user")?.trimmingSpaces()
        fleet.passwordFile = file("password-file")
        if fleet.user != nil && fleet.passwordFile == nil {
            throw r.invalid("fleet", "password-file", "missing: user needs a password file")
        }
        if let v = try r.number("fleet", "lock-ttl", min: 5, max: 3600) { fleet.lockTTL = v }
        if let v = try r.number("fleet", "timeout", min: 0.5, max: 600) { fleet.requestTimeout = v }
        config.fleet = fleet
    }

    /// GLib quotes the offending line's text but not its number; find it.
    private static func line(of message: String, in text: String) -> Int? {
        guard let open = message.firstIndex(of: "“"),
            let close = message[message.index(after: open)...].firstIndex(of: "”")
        else {
            return nil
        }
        let quoted = message[message.index(after: open)..<close]
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        where line == quoted || line.trimmingSpaces() == quoted.trimmingSpaces() {
            return n + 1
        }
        return nil
    }

    /// A `[git]` key in canonical form: lowercased host, path segments without empty ones; nil when
    /// there is no host or it contains a scheme.
    package static func gitPattern(_ key: String) -> String? {
        let parts = key.trimmingSpaces().split(separator: "/", omittingEmptySubsequences: true)
        guard !key.contains("://"), let host = parts.first, !host.contains(where: { $0.isWhitespace }) else {
            return nil
        }
        return ([host.lowercased()] + parts.dropFirst().map(String.init)).joined(separator: "/")
    }

    /// `[provider.ID]`: a device-code provider (the built-in `openai` fills in what is missing).
    private static func provider(id: String, group: String, _ r: Reader) throws(ConfigError) -> ProviderConfig {
        let file = r.file
        let path = r.path
        func url(_ group: String, _ key: String) throws(ConfigError) -> URL? { try r.url(group, key) }
        guard (try? Slot(id)) != nil else {
            throw .invalidValue(
                path: path,
                group: group,
                key: "",
                detail: "provider id \"\(id)\" must look like a slot name (a-z, 0-9, . _ -)"
            )
        }
        let base: ProviderConfig? = id == "openai" ? .openAI : id == "github" ? .gitHub : nil
        // A group without a type names a built-in provider, or is one misspelt ([provider.opneai]):
        // said so, rather than that `type` is missing.
        if base == nil && file.string(group, "type") == nil {
            let near = Suggest.closest(to: id, in: builtInProviders).map { "did you mean [provider.\($0)]? " } ?? ""
            throw .invalidValue(
                path: path,
                group: group,
                key: "",
                detail: "unknown provider \"\(id)\" (\(near)the built-in ones are openai and github; "
                    + "a provider of your own needs type = device-code, issuer and client-id)"
            )
        }
        let kindRaw = file.string(group, "type") ?? base?.kind.rawValue
        guard let kindRaw, let kind = ProviderConfig.Kind(rawValue: kindRaw.trimmingSpaces()) else {
            throw .invalidValue(
                path: path,
                group: group,
                key: "type",
                detail: "expected openai or device-code, got \"\(kindRaw ?? "")\""
            )
        }
        guard let issuer = try url(group, "issuer") ?? base?.issuer else {
            throw .invalidValue(path: path, group: group, key: "issuer", detail: "missing (the provider's base URL)")
        }
        guard let clientID = file.string(group, "client-id") ?? base?.clientID, !clientID.isEmpty || base != nil else {
            throw .invalidValue(path: path, group: group, key: "client-id", detail: "missing")
        }
        let scopes = file.string(group, "scopes").map {
            $0.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        }
        var environment: [String: String] = base?.environment ?? [:]
        for key in file.keys(group) where key.hasPrefix("env.") {
            let name = String(key.dropFirst(4))
            let field = file.string(group, key) ?? ""
            guard Self.isShellIdentifier(name) else {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "not a valid environment variable name (an ASCII letter or _, then letters, digits and _)"
                )
            }
            guard ["access_token", "id_token", "account_id"].contains(field) else {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: key,
                    detail: "expected access_token, id_token or account_id"
                )
            }
            environment[name] = field
        }
        var provider = ProviderConfig(
            id: id,
            kind: kind,
            issuer: issuer,
            clientID: clientID,
            scopes: scopes ?? base?.scopes ?? ["openid", "email", "offline_access"],
            planClaim: file.string(group, "plan-claim"),
            accountClaim: file.string(group, "account-claim"),
            deviceAuthorizationEndpoint: try url(group, "device-authorization-endpoint"),
            tokenEndpoint: try url(group, "token-endpoint"),
            revocationEndpoint: try url(group, "revocation-endpoint"),
            usageBaseURL: try url(group, "usage-base-url") ?? base?.usageBaseURL,
            environment: environment
        )
        provider.authorizationEndpoint = try url(group, "authorization-endpoint")
        provider.usagePageURL = try url(group, "usage-page-url") ?? base?.usagePageURL
        provider.tokensPageURL = try url(group, "tokens-page-url") ?? base?.tokensPageURL
        if base?.id == "github" {
            provider.deviceAuthorizationEndpoint =
                provider.deviceAuthorizationEndpoint ?? base?.deviceAuthorizationEndpoint
            provider.tokenEndpoint = provider.tokenEndpoint ?? base?.tokenEndpoint
            provider.gitUsername = base?.gitUsername
        }
        if let username = file.string(group, "git-username")?.trimmingSpaces() {
            guard !username.isEmpty, !username.contains(where: { $0.isNewline || $0 == "\0" }) else {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: "git-username",
                    detail: "must be a non-empty single line"
                )
            }
            provider.gitUsername = username
        }
        if let raw = file.string(group, "kube-token") {
            guard let kind = ProviderConfig.KubeToken(rawValue: raw.trimmingSpaces()) else {
                throw .invalidValue(
                    path: path,
                    group: group,
                    key: "kube-token",
                    detail: "expected access-token or id-token, got \"\(raw)\""
                )
            }
            provider.kubeToken = kind
        }
        return provider
    }

    /// Whether `name` can name a shell variable (`env.NAME`): an ASCII letter or `_`, then ASCII
    /// letters, digits and `_`, as every shell `lanyard env` writes for accepts.
    static func isShellIdentifier(_ name: String) -> Bool {
        func letter(_ b: UInt8) -> Bool { (0x61...0x7A).contains(b) || (0x41...0x5A).contains(b) || b == 0x5F }
        guard let first = name.utf8.first, letter(first) else { return false }
        return name.utf8.allSatisfy { letter($0) || (0x30...0x39).contains($0) }
    }
}

/// This machine's default name in a fleet: its host name, as a slot-like name.
package enum FleetMachineName {
    package static func fromHost() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "machine" }
        let host = String(nulTerminated: buffer)
        return Slot.suggested(from: host.split(separator: ".").first.map(String.init) ?? host)?.name ?? "machine"
    }
}
