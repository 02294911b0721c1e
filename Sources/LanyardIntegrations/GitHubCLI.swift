import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

/// The accounts the GitHub CLI (`gh`) holds: its `hosts.yml` names the hosts and users, and
/// `gh auth token --hostname HOST` hands out each token wherever gh keeps it (the file or the
/// system keyring).
package struct GitHubCLI: Sendable {
    /// One account gh is signed in to.
    package struct Account: Equatable, Sendable {
        package var host: String
        package var user: String?
        /// The token when hosts.yml holds it (gh keeps it in the keyring otherwise).
        package var fileToken: String?
    }

    /// A hosts.yml that is not gh's format. Names the line, never its text (it may hold a token).
    package struct HostsFileError: LanyardError, Equatable {
        package let path: String
        package let line: Int
        package let problem: String
        package var code: ErrorCode { .ghHostsCorrupt }
        package var errorDescription: String? { "\(path) line \(line) \(problem) (left untouched)" }
    }

    /// The folder gh reads its configuration from.
    package let configDirectory: String
    /// The `gh` program, or nil to read hosts.yml alone.
    package let executable: String?
    let environment: [String: String]

    /// gh's folder as gh finds it: `GH_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gh`, else `~/.config/gh`.
    package init(environment: [String: String], executable: String? = nil) {
        self.environment = environment
        if let dir = environment["GH_CONFIG_DIR"], !dir.isEmpty {
            configDirectory = dir
        } else if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            configDirectory = xdg + "/gh"
        } else {
            configDirectory = (environment["HOME"] ?? PathText.passwordDatabaseHome()) + "/.config/gh"
        }
        self.executable = executable ?? Self.findExecutable(path: environment["PATH"])
    }

    package var hostsFile: String { configDirectory + "/hosts.yml" }

    static func findExecutable(path: String?) -> String? {
        for dir in (path ?? "/usr/bin:/bin").split(separator: ":") where access("\(dir)/gh", X_OK) == 0 {
            return "\(dir)/gh"
        }
        return nil
    }

    /// The accounts in hosts.yml, in file order (none when gh was never signed in).
    package func accounts() throws -> [Account] {
        guard let data = FileManager.default.contents(atPath: hostsFile) else { return [] }
        return try Self.parseHosts(String(decoding: data, as: UTF8.self), path: hostsFile)
    }

    /// Reads the part of gh's hosts.yml Lanyard needs: top-level `HOST:` keys with indented
    /// `user:` and `oauth_token:` values (other keys and nested maps such as `users:` are skipped).
    static func parseHosts(_ text: String, path: String) throws(HostsFileError) -> [Account] {
        var accounts: [Account] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine
            let trimmed = line.trimmingSpaces()
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            guard let colon = trimmed.firstIndex(of: ":") else {
                throw HostsFileError(path: path, line: index + 1, problem: "is not `key: value`")
            }
            let key = String(trimmed[..<colon]).trimmingSpaces()
            var value = String(trimmed[trimmed.index(after: colon)...]).trimmingSpaces()
            if value.count >= 2, let q = value.first, q == "\"" || q == "'", value.last == q {
                value = String(value.dropFirst().dropLast())
            }
            if !line.hasPrefix(" ") && !line.hasPrefix("\t") {
                guard value.isEmpty, !key.isEmpty, !key.contains(where: { $0.isWhitespace || $0 == "/" }),
                    TerminalText.lineProblem(key) == nil
                else {
                    throw HostsFileError(path: path, line: index + 1, problem: "is not a host name followed by `:`")
                }
                accounts.append(Account(host: key.lowercased(), user: nil, fileToken: nil))
                continue
            }
            guard !accounts.isEmpty else {
                throw HostsFileError(path: path, line: index + 1, problem: "is indented before any host")
            }
            let indent = line.prefix { $0 == " " || $0 == "\t" }.count
            guard indent <= 4 else { continue }  // inside a nested map (`users:` of newer gh)
            switch key {
            case "user" where !value.isEmpty:
                if let problem = TerminalText.lineProblem(value, limit: 256) {
                    throw HostsFileError(path: path, line: index + 1, problem: "user \(problem)")
                }
                accounts[accounts.count - 1].user = value
            case "oauth_token" where !value.isEmpty: accounts[accounts.count - 1].fileToken = value
            default: break
            }
        }
        return accounts
    }

    /// The token gh hands out for `host` (`gh auth token --hostname HOST`), or hosts.yml's when gh
    /// is not installed. Tokens in the environment (`GH_TOKEN`, …) are not what gh holds, so they
    /// are hidden from it.
    package func token(for account: Account) throws -> String? {
        guard let executable else { return account.fileToken }
        var env = environment.filter {
            !["GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "GH_HOST"].contains($0.key)
        }
        env["GH_CONFIG_DIR"] = configDirectory
        env["GH_PROMPT_DISABLED"] = "1"
        let run = try Subprocess.run(
            executable,
            ["auth", "token", "--hostname", account.host],
            environment: env,
            stdout: .capture,
            stderr: .discard
        )
        guard run.status == 0 else { return account.fileToken }
        let token = String(decoding: run.stdout, as: UTF8.self).trimmingWhitespaceAndNewlines()
        return token.isEmpty ? account.fileToken : token
    }
}

/// What `gh import` did for one account.
package struct AdoptedGitHubAccount: Equatable, Sendable {
    package var slot: Slot
    package var host: String
    package var user: String?
    package var backend: BackendKind
    /// False when the slot already held this exact token.
    package var changed: Bool
}

extension AccountManager {
    /// Adopts the accounts gh holds into slots (provider `github`, the token as the access token,
    /// no expiry or refresh token: gh's tokens do not expire). `hosts` limits it to those hosts;
    /// `requested` names the slot when one account is adopted. An existing slot is overwritten only
    /// when it is a slot of the same host and user.
    package func adoptGitHubCLIAccounts(
        from gh: GitHubCLI,
        hosts: [String] = [],
        into requested: Slot? = nil,
        provider: String = "github"
    ) throws -> [AdoptedGitHubAccount] {
        var accounts = try gh.accounts()
        if !hosts.isEmpty {
            let wanted = Set(hosts.map { $0.lowercased() })
            for host in wanted where !accounts.contains(where: { $0.host == host }) {
                throw IntegrationError.unsupported(
                    "gh holds no account for \(TerminalText.escaped(host)) (see \(gh.hostsFile))"
                )
            }
            accounts = accounts.filter { wanted.contains($0.host) }
        }
        guard !accounts.isEmpty else {
            throw IntegrationError.unsupported(
                "gh holds no accounts (no hosts in \(gh.hostsFile)); sign in with `gh auth login` first"
            )
        }
        if requested != nil && accounts.count > 1 {
            throw IntegrationError.unsupported(
                "gh holds \(accounts.count) accounts; name one with --hostname to choose the slot's name"
            )
        }
        var adopted: [AdoptedGitHubAccount] = []
        for account in accounts {
            guard let token = try gh.token(for: account), TokenText.problem(token) == nil else {
                throw IntegrationError.unsupported(
                    "gh gave no usable token for \(TerminalText.escaped(account.host)); run `gh auth status`"
                )
            }
            let slot = try requested ?? Self.gitHubSlotName(account)
            let document = try registry.load()
            if let existing = document.slots[slot],
                existing.provider != provider
                    || (existing.account.email != nil && existing.account.email != account.user)
            {
                throw RegistryError.slotExists(slot, holdsAnotherAccount: true)
            }
            let backend = document.slots[slot]?.backend ?? backendForNewSlot()
            let store = try openStore(backend, false)
            let info = AccountInfo(email: account.user, userID: account.user, accountID: account.host)
            let credential = Credential(
                provider: provider,
                tokens: TokenSet(accessToken: token),
                lastRefresh: nil,
                account: info
            )
            let unchanged = (try? store.get(slot))?.tokens.accessToken == token
            let now = clock.now()
            try registry.update { doc in
                if !unchanged { try store.put(credential, for: slot) }
                var record = doc.slots[slot] ?? SlotRecord(provider: provider, backend: backend, createdAt: now)
                record.account = info
                record.state = .signedIn(expiresAt: nil)
                record.lastErrorCode = nil
                doc.slots[slot] = record
                if doc.active == nil { doc.active = slot }
            }
            adopted.append(
                AdoptedGitHubAccount(
                    slot: slot,
                    host: account.host,
                    user: account.user,
                    backend: backend,
                    changed: !unchanged
                )
            )
        }
        return adopted
    }

    /// `gh-USER` for github.com, `gh-USER-HOST` for other hosts (lowercased, other characters as `-`).
    static func gitHubSlotName(_ account: GitHubCLI.Account) throws -> Slot {
        let base =
            account.host == "github.com"
            ? "gh-\(account.user ?? "github")" : "gh-\(account.user.map { $0 + "-" } ?? "")\(account.host)"
        let cleaned = String(
            base.lowercased().map {
                ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "." || $0 == "_" || $0 == "-" ? $0 : "-"
            }
        )
        return try Slot(String(cleaned.prefix(64)))
    }
}
