import Foundation
import LanyardCLI
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardIntegrations

/// Seeds slots into the real file store (no keyring needed) for the git and bundle tests.
func fileStoreHarness(config: String = "") async throws -> CLIHarness {
    let h = CLIHarness()
    h.realStores = true
    try FileManager.default.createDirectory(atPath: h.paths.configDirectory, withIntermediateDirectories: true)
    try ("[store]\nbackend = file\n" + config).write(toFile: h.paths.configFile, atomically: true, encoding: .utf8)
    let created = await h.run("store", "init", "--no-passphrase")
    #expect(created.status == 0, "\(created.stderr)")
    return h
}

@discardableResult
func seedFileSlot(_ h: CLIHarness, _ name: String, token: String? = nil) throws -> Slot {
    let slot = try Slot(name)
    let account = AccountInfo(email: "\(name)@example.com", accountID: "acct-\(name)")
    let credential = Credential(
        provider: "openai",
        tokens: TokenSet(
            accessToken: token ?? "AT-\(name)-SECRET",
            refreshToken: "RT-\(name)-SECRET",
            expiresAt: Date(timeIntervalSince1970: 4_000_000_000)
        ),
        lastRefresh: Date(timeIntervalSince1970: 1_799_000_000),
        account: account
    )
    try StoreOpeners.system(.file, LanyardConfig(), h.paths, false).put(credential, for: slot)
    try h.registry.update { doc in
        doc.slots[slot] = SlotRecord(
            provider: "openai",
            backend: .file,
            account: account,
            state: .signedIn(expiresAt: credential.tokens.expiresAt),
            createdAt: Date(timeIntervalSince1970: 1_799_000_000)
        )
    }
    return slot
}

@Suite(.serialized) struct GitCredentialTests {
    let mapping = "[git]\nexample.com = work\nexample.com/org = personal\nExample.com/org/special = special\n"

    @Test func matchingPicksTheLongestPathPrefix() async throws {
        let m: [String: Slot] = [
            "example.com": try Slot("work"), "example.com/org": try Slot("personal"),
            "example.com/org/special": try Slot("special"), "other.com/x": try Slot("x"),
        ]
        #expect(GitCredential.slot(host: "example.com", path: nil, in: m)?.slot.name == "work")
        #expect(GitCredential.slot(host: "EXAMPLE.com", path: "org/repo.git", in: m)?.slot.name == "personal")
        #expect(GitCredential.slot(host: "example.com", path: "org/special.git", in: m)?.slot.name == "special")
        #expect(GitCredential.slot(host: "example.com", path: "org/special/deeper", in: m)?.slot.name == "special")
        #expect(
            GitCredential.slot(host: "example.com", path: "organisation/repo", in: m)?.slot.name == "work",
            "whole segments only"
        )
        #expect(GitCredential.slot(host: "other.com", path: nil, in: m) == nil, "a path mapping needs a path")
        #expect(GitCredential.slot(host: "other.com", path: "x/y", in: m)?.slot.name == "x")
        #expect(GitCredential.slot(host: "nowhere.com", path: "x", in: m) == nil)
        #expect(ConfigFile.gitPattern("GitHub.com/Org/") == "github.com/Org")
        #expect(ConfigFile.gitPattern("https://github.com") == nil)
    }

    /// `bobcorp/../x.git` is `x.git` at the server, so it must not get bob's token.
    @Test func dotSegmentsCannotReachAnotherAccountsPath() async throws {
        let m: [String: Slot] = ["example.com": try Slot("work"), "example.com/bobcorp": try Slot("bob")]
        #expect(GitCredential.slot(host: "example.com", path: "bobcorp/../x.git", in: m)?.slot.name == "work")
        #expect(GitCredential.slot(host: "example.com", path: "bobcorp/%2e%2e/x.git", in: m)?.slot.name == "work")
        #expect(GitCredential.slot(host: "example.com", path: "bobcorp/.%2E/x.git", in: m)?.slot.name == "work")
        #expect(GitCredential.slot(host: "example.com", path: "./bobcorp/./repo.git", in: m)?.slot.name == "bob")
        #expect(GitCredential.slot(host: "example.com", path: "x/../bobcorp/repo.git", in: m)?.slot.name == "bob")
        #expect(
            GitCredential.slot(host: "example.com", path: "../../bobcorp/repo", in: m)?.slot.name == "bob",
            "`..` above the root stays there"
        )
        #expect(GitCredential.slot(host: "example.com", path: "bob%63orp/repo", in: m)?.slot.name == "bob")
    }

    @Test func configGroupAndProviderUsername() async throws {
        let text = mapping + "[provider.openai]\ngit-username = oauth2\n"
        let loaded = try ConfigFile.parse(Data(text.utf8), path: "config.ini")
        #expect(loaded.warnings.isEmpty)
        #expect(
            loaded.config.gitCredentials == [
                "example.com": try Slot("work"), "example.com/org": try Slot("personal"),
                "example.com/org/special": try Slot("special"),
            ]
        )
        #expect(loaded.config.providers["openai"]?.gitUsername == "oauth2")
        #expect(throws: ConfigError.self) {
            try ConfigFile.parse(Data("[git]\nexample.com = Not A Slot!\n".utf8), path: "c")
        }
    }

    @Test func getAnswersMappedHostsOnly() async throws {
        let h = try await fileStoreHarness(config: mapping)
        try seedFileSlot(h, "work")
        try seedFileSlot(h, "personal")
        h.input = ["protocol=https", "host=example.com", "path=org/repo.git", ""]
        let r = await h.run("git-credential", "get")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "username=x-access-token\npassword=AT-personal-SECRET\npassword_expiry_utc=4000000000\n")

        h.input = ["protocol=https", "host=example.com"]  // EOF ends input too
        #expect(await h.run("git-credential", "get").stdout.contains("password=AT-work-SECRET\n"))

        h.input = ["protocol=https", "host=unmapped.example", ""]
        let unmapped = await h.run("git-credential", "get")
        #expect(unmapped.status == 0 && unmapped.stdout.isEmpty && unmapped.stderr.isEmpty)

        h.input = ["protocol=http", "host=example.com", ""]
        #expect(await h.run("git-credential", "get").stdout.isEmpty, "never over plain http")

        for sub in ["store", "erase"] {
            h.input = ["protocol=https", "host=example.com", "username=x-access-token", "password=AT-work-SECRET", ""]
            let r = await h.run("git-credential", sub)
            #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty)
        }
        #expect(
            try StoreOpeners.system(.file, LanyardConfig(), h.paths, false).getInTest(try Slot("work")).tokens
                .accessToken == "AT-work-SECRET",
            "erase leaves the slot alone"
        )

        try (mapping + "[provider.openai]\ngit-username = oauth2\n").write(
            toFile: h.paths.configFile,
            atomically: true,
            encoding: .utf8
        )
        h.input = ["protocol=https", "host=example.com", ""]
        #expect(await h.run("git-credential", "get").stdout.hasPrefix("username=oauth2\n"))
    }

    @Test func badInputIsAUsageErrorWithoutEchoingIt() async throws {
        let h = try await fileStoreHarness(config: mapping)
        try seedFileSlot(h, "work")
        h.input = ["protocol=https", "ghp_NOTKEYVALUE_SECRET", ""]
        let r = await h.run("git-credential", "get")
        #expect(r.status == 2)
        #expect(r.stderr.contains("input line 2 is not key=value"))
        #expect(r.stdout.isEmpty && !r.stderr.contains("SECRET"))
        h.input = ["host=example.com", "pass word=SECRET-VALUE", ""]
        let bad = await h.run("git-credential", "store")
        #expect(bad.status == 2 && bad.stderr.contains("line 2") && !bad.stderr.contains("SECRET"))
        #expect(await h.run("git-credential", "fetch").status == 2)
    }

    /// Found by the helpers fuzzer: a NUL followed by a combining mark is a single Character that
    /// is not "\0", so a Character-level check let it through into the attributes.
    @Test func nulGluedToACombiningMarkIsRejected() async throws {
        #expect(throws: GitCredentialInputError(line: 2, problem: "contains a NUL byte (it is not text)")) {
            try GitCredential.read(TextInput(Data("host=example.com\npassword=ab\u{0}\u{487}cd\n\n".utf8)))
        }
        // The same shape in a [docker]/[netrc] host key: a control byte glued to a combining mark.
        #expect(ConfigFile.hostKey("ghcr.io\u{1}\u{301}") == nil)
        #expect(ConfigFile.hostKey("ghcr.io\u{85}") == nil)
        #expect(ConfigFile.hostKey("Registry.Local:5000") == "registry.local:5000")
    }

    @Test func setupPrintsTheGitConfig() async throws {
        let h = try await fileStoreHarness(config: mapping)
        let host = await h.run("git-credential", "setup", "example.com")
        #expect(host.status == 0)
        #expect(
            host.stdout == """
                git config --global credential.https://example.com.helper '!lanyard git-credential'
                git config --global credential.https://example.com.useHttpPath 'true'

                """,
            "example.com has path mappings, so git must send paths"
        )
        let other = await h.run("git-credential", "setup", "git.example.org", "--slot", "work")
        #expect(
            other.stdout == "git config --global credential.https://git.example.org.helper '!lanyard git-credential'\n"
        )
        #expect(other.stderr.contains("[git]\ngit.example.org = work"))
    }

    /// The real thing: `git credential fill` runs the built binary as its helper.
    @Test func realGitCredentialFill() async throws {
        let h = try await fileStoreHarness(config: mapping)
        try seedFileSlot(h, "work")
        try seedFileSlot(h, "personal")
        let gitConfig = h.root + "/gitconfig"
        h.extraEnvironment["GIT_CONFIG_GLOBAL"] = gitConfig
        h.extraEnvironment["GIT_CONFIG_NOSYSTEM"] = "1"
        let applied = await h.run("git-credential", "setup", "example.com", "--apply")
        #expect(applied.status == 0, "\(applied.stderr)")
        #expect(await h.run("git-credential", "setup", "unmapped.example", "--apply").status == 0)
        let written = try String(contentsOfFile: gitConfig, encoding: .utf8)
        #expect(written.contains("helper = !lanyard git-credential") && written.contains("useHttpPath = true"))

        func fill(_ input: String) throws -> (Int32, String, String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["git", "credential", "fill"]
            var env = h.environment
            env["PATH"] =
                (lanyardBinary() as NSString).deletingLastPathComponent + ":" + (env["PATH"] ?? "/usr/bin:/bin")
            env["GIT_TERMINAL_PROMPT"] = "0"
            env["GIT_ASKPASS"] = nil
            env["SSH_ASKPASS"] = nil
            p.environment = env
            let stdin = Pipe()
            let out = Pipe()
            let err = Pipe()
            p.standardInput = stdin
            p.standardOutput = out
            p.standardError = err
            try p.run()
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try stdin.fileHandleForWriting.close()
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        }
        let (status, out, err) = try fill("protocol=https\nhost=example.com\npath=org/repo.git\n\n")
        #expect(status == 0, "\(err)")
        #expect(out.contains("username=x-access-token\n") && out.contains("password=AT-personal-SECRET\n"))
        // password_expiry_utc reaches fill's output only from git 2.41 (Debian 12 has 2.39); `get` is checked above.
        let (_, workOut, _) = try fill("protocol=https\nhost=example.com\npath=someone/repo.git\n\n")
        #expect(workOut.contains("password=AT-work-SECRET\n"))
        let (unmappedStatus, unmappedOut, _) = try fill("protocol=https\nhost=unmapped.example\n\n")
        #expect(unmappedStatus != 0, "git finds no credential and may not prompt")
        #expect(!unmappedOut.contains("password="))
    }
}
