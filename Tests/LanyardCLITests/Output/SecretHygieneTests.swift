import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// Tokens stay where they belong: never in the argv of a process Lanyard starts, in the
/// environment of Lanyard's own processes, in the event log, in messages or in `--json` output
/// (except `token`/`env`, which exist to print them); files 0600 and folders 0700 even under
/// umask 000; Lanyard's processes cannot be dumped or traced.
@Suite(.serialized) struct SecretHygieneTests {
    /// Every access and refresh token the emulator ever issued.
    static func issuedSecrets(_ server: OAuthTestServer) async throws -> [String] {
        let families = try await server.get("/_test/tokens")["families"] as? [[String: Any]] ?? []
        var out: [String] = []
        for family in families {
            out += (family["refresh_tokens"] as? [[String: Any]] ?? []).compactMap { $0["refresh_token"] as? String }
            out += (family["access_tokens"] as? [[String: Any]] ?? []).compactMap { $0["access_token"] as? String }
        }
        return out
    }

    @Test func noTokenInArgvEnvironmentEventsMessagesOrJSONAndPrivateModesUnderUmask000() async throws {
        // Every token due on every use (lead-share 1, a lead longer than any lifetime), so each
        // command below refreshes and starts every process it can (lanyard-net, the worker, hooks).
        let env = try await IntegrationHome(
            extraConfig:
                "[refresh]\nlead = 100000000\nlead-share = 1\n[agent]\nnotify = false\nhook = cat > /dev/null\n"
        )
        try await env.signIn("work", email: "w@example.com")
        try await env.signIn("home", email: "h@example.com")
        let trace = env.home.root + "/execve.trace"
        // umask 000 for everything Lanyard creates from here on; strace records every execve with
        // its whole argv and environment.
        let launcher = [
            "/bin/sh", "-c", "umask 000; exec strace -f -v -qq -A -s 1000000 -e trace=execve -o \"$0\" \"$@\"", trace,
        ]
        func run(_ args: String..., extra: [String: String] = [:]) throws -> TestHome.Output {
            try env.home.run(
                args,
                extraEnvironment: extra.merging(["CODEX_HOME": env.codexHome]) { $1 },
                launcher: launcher
            )
        }
        var quiet: [(String, stdout: String, stderr: String)] = []  // outputs that must hold no token
        func add(_ what: String, _ out: TestHome.Output) { quiet.append((what, out.stdout, out.stderr)) }
        let token = try run("token", "work")
        #expect(token.status == 0, "\(token.stderr)")
        quiet.append(("token (stderr)", "", token.stderr))
        for args in [
            ["refresh", "work"], ["refresh", "home", "--json"],
            ["exec", "--account", "work", "--", "/bin/sh", "-c", "exit 0"],
            ["codex", "export", "work"], ["agent", "--once"], ["usage", "work", "--json"], ["list", "--json"],
            ["status", "--json"], ["which", "--json"], ["doctor", "--json"], ["switch", "home", "--json"],
        ] {
            let out = try env.home.run(args, extraEnvironment: ["CODEX_HOME": env.codexHome], launcher: launcher)
            #expect(out.status == 0, "\(args): \(out.stderr)")
            add(args.joined(separator: " "), out)
        }
        // Failures: a server error and a refresh token the server no longer accepts.
        try await env.server.hook(
            "/_test/fault",
            ["endpoint": "oauth_token", "type": "status", "status": 500, "count": 10]
        )
        add("refresh (500)", try run("refresh", "work", "--json"))
        add("refresh (500, text)", try run("refresh", "work"))
        try await env.server.hook("/_test/faults/clear", ["endpoint": "oauth_token"])
        try await env.server.hook("/_test/invalidate_refresh", ["email": "h@example.com"])
        let dead = try run("refresh", "home")
        #expect(dead.status == 4, "\(dead.stderr)")
        add("refresh (revoked)", dead)
        add("token (revoked)", try run("token", "home", "--json"))

        let secrets = try await Self.issuedSecrets(env.server)
        #expect(secrets.count >= 8, "the commands above refreshed: \(secrets.count) tokens issued")
        func leaks(_ text: String) -> Bool { secrets.contains { text.contains($0) } }

        for (what, stdout, stderr) in quiet {
            #expect(!leaks(stdout) && !leaks(stderr), "a token in the output of \(what)")
        }
        #expect(
            !leaks(try String(contentsOfFile: env.paths.stateDirectory + "/events.jsonl", encoding: .utf8)),
            "a token in the event log"
        )
        #expect(!leaks(try String(contentsOfFile: env.paths.registryFile, encoding: .utf8)), "a token in the registry")

        // execve: no token in any argv; none in the environment given to Lanyard's own processes
        // (`exec` gives the user's command its tokens in the environment, by design).
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").filter {
            $0.contains("execve(\"")
        }
        var lanyardExecs = 0
        var otherExecs = 0
        for line in lines {
            guard let argvStart = line.range(of: ", [\""),
                let envStart = line.range(of: "\"], [", range: argvStart.upperBound..<line.endIndex)
            else { continue }
            let path = line[line.range(of: "execve(\"")!.upperBound...].prefix { $0 != "\"" }
            let argv = String(line[argvStart.upperBound..<envStart.lowerBound])
            let environment = String(line[envStart.upperBound...])
            #expect(!leaks(argv), "a token in the argv of \(path)")
            if path.hasSuffix("/lanyard") || path.hasSuffix("/lanyard-net") {
                lanyardExecs += 1
                #expect(!leaks(environment), "a token in the environment of \(path)")
            } else {
                otherExecs += 1
            }
        }
        #expect(lanyardExecs >= 20, "lanyard, lanyard-net and refresh workers were traced (\(lanyardExecs))")
        #expect(otherExecs >= 2, "the exec'd command and the agent's hook were traced (\(otherExecs))")

        // Modes: everything Lanyard created under umask 000.
        var checked = 0
        for base in [
            env.paths.dataDirectory, env.paths.stateDirectory, env.home.root + "/run/lanyard",
            env.codexHome + "/auth.json",
        ] {
            let enumerator = FileManager.default.enumerator(atPath: base)
            for case let path in [base] + (enumerator?.allObjects as? [String] ?? []).map({ base + "/" + $0 }) {
                var st = stat()
                guard lstat(path, &st) == 0 else { continue }
                let kind = st.st_mode & S_IFMT
                if kind == S_IFDIR {
                    #expect(st.st_mode & 0o777 == 0o700, "\(path) is \(String(st.st_mode & 0o777, radix: 8))")
                } else if kind == S_IFREG {
                    #expect(st.st_mode & 0o077 == 0, "\(path) is \(String(st.st_mode & 0o777, radix: 8))")
                }
                checked += 1
            }
        }
        #expect(checked >= 10)
    }

    /// A token type in a log line or a failing test's message shows no token.
    @Test func tokenTypesPrintRedacted() {
        let tokens = TokenSet(accessToken: "at-SECRET", refreshToken: "rt-SECRET", idToken: "id-SECRET")
        let credential = Credential(provider: "openai", tokens: tokens, lastRefresh: nil, account: AccountInfo())
        for text in ["\(tokens)", String(reflecting: tokens), "\(credential)", String(reflecting: credential)] {
            #expect(!text.contains("SECRET"), "\(text)")
        }
    }

    /// The agent holds every slot's tokens for hours: no core dump of it, and another process of
    /// the same user cannot read its memory or environment. The program `exec` runs gets the
    /// core-file limit the user had.
    @Test func lanyardProcessesCannotBeDumpedOrTraced() async throws {
        let env = try await IntegrationHome(extraConfig: "[agent]\nnotify = false\n")
        try await env.signIn("work", email: "w@example.com")
        let (agent, _, err) = try env.home.start(["agent"])
        defer {
            agent.terminate()
            agent.waitUntilExit()
        }
        var started = ""
        while !started.contains("started"), let chunk = try err.fileHandleForReading.read(upToCount: 1), !chunk.isEmpty
        {
            started += String(decoding: chunk, as: UTF8.self)
        }
        let pid = agent.processIdentifier
        if getuid() != 0 {
            // (root may read any process's: CAP_SYS_PTRACE. The doctor check below holds for all.)
            #expect(
                open("/proc/\(pid)/environ", O_RDONLY) == -1 && errno == EACCES,
                "the agent's environment is readable"
            )
            #expect(open("/proc/\(pid)/mem", O_RDONLY) == -1 && errno == EACCES, "the agent's memory is readable")
        }
        let doctor = try env.run("doctor", "--json")
        let process = try #require(try JSONValue.parse(Data(doctor.stdout.utf8))["process"], "\(doctor.stdout)")
        #expect(process["dumpable"] == .bool(false) && process["core_limit"] == .number(0), "\(process)")
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).first == "0", "\(core)")

        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        let blocks = limit.rlim_max >= 2048 * 1024 ? "2048" : "0"
        let launcher = ["/bin/sh", "-c", "ulimit -S -c \(blocks) && exec \"$@\"", "sh"]
        let child = try env.home.run(
            [
                "exec", "--account", "work", "--", "/bin/sh", "-c",
                "ulimit -c; grep -c . /proc/self/environ > /dev/null && echo readable",
            ],
            extraEnvironment: ["CODEX_HOME": env.codexHome],
            launcher: launcher
        )
        #expect(child.status == 0, "\(child.stderr)")
        #expect(
            child.stdout == "\(blocks)\nreadable\n",
            "the command exec runs has the user's core limit and is dumpable again"
        )
    }
}
