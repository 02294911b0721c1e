import Foundation
import LanyardCore
import LanyardIntegrations
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// `lanyard exec --follow -- codex`: a switch while Codex runs stops it and resumes its session as
/// the new slot. Codex is played by a stand-in that records what it was started with, the
/// account its auth.json holds and the signals it gets.
@Suite struct ExecFollowTests {
    /// The stand-in `codex`. It appends one JSON line a happening to $STANDIN_LOG. Started
    /// without `resume`, it records a session as Codex does (`sessions/…/rollout-…-UUID.jsonl` in
    /// CODEX_HOME; none with STANDIN_NO_SESSION=1), prints `ready PID` and waits. SIGINT ends it
    /// with 130 (STANDIN_MODE=int) or is only recorded (`term`; `keep`: Ctrl-C interrupts a turn;
    /// `stubborn`). SIGTERM ends it with 143 at once, as a signal's default action would, nothing
    /// tidied up (only recorded in `stubborn` mode). SIGUSR1 ends it with $STANDIN_EXIT. In `keep`
    /// mode the first SIGINT also puts the terminal in raw mode, as a full-screen program does,
    /// never to put it back. Started with `resume`, it records whether the terminal echoes and
    /// exits 7.
    static let standIn = """
        #!/usr/bin/python3
        import json, os, sys, signal, uuid
        home = os.environ["CODEX_HOME"]
        def log(**record):
            with open(os.environ["STANDIN_LOG"], "a") as f:
                f.write(json.dumps(record) + "\\n")
        auth = json.load(open(os.path.join(home, "auth.json")))
        log(event="start", argv=sys.argv[1:], \
        slot=os.environ.get("LANYARD_ACCOUNT"), account=auth["tokens"]["account_id"])
        if sys.argv[1:2] == ["resume"]:
            if os.isatty(0):
                import termios
                log(event="terminal", echo=bool(termios.tcgetattr(0)[3] & termios.ECHO))
            sys.exit(7)
        mode = os.environ.get("STANDIN_MODE", "int")
        def on_int(sig, frame):
            log(event="signal", signal="INT")
            if mode == "int":
                sys.exit(130)
            if mode == "keep" and os.isatty(0):
                import tty
                tty.setraw(0)
        def on_term(sig, frame):
            log(event="signal", signal="TERM")
            if mode != "stubborn":
                os._exit(143)
        signal.signal(signal.SIGINT, on_int)
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGUSR1, lambda sig, frame: sys.exit(int(os.environ.get("STANDIN_EXIT", "0"))))
        if os.environ.get("STANDIN_NO_SESSION") != "1":  # Codex writes none before the first turn
            session = str(uuid.uuid4())
            day = os.path.join(home, "sessions", "2026", "12", "04")
            os.makedirs(day, exist_ok=True)
            with open(os.path.join(day, "rollout-2026-12-04T12-00-00-" + session + ".jsonl"), "w") as f:
                f.write(json.dumps({"type": "session_meta", "payload": {"id": session}}) + "\\n")
            log(event="session", id=session)
        print("ready", os.getpid(), flush=True)
        while True:
            signal.pause()
        """

    /// A home with slots `a` and `b` (a active) and the stand-in as `codex` on PATH.
    struct Setup {
        let env: IntegrationHome
        let log: String
        let bin: String
        var accounts: [String: String] = [:]

        init(slots: [String] = ["a", "b"], extraConfig: String = "") async throws {
            env = try await IntegrationHome(extraConfig: extraConfig)
            bin = env.home.root + "/bin"
            log = env.home.root + "/standin.log"
            try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
            try ExecFollowTests.standIn.write(toFile: bin + "/codex", atomically: true, encoding: .utf8)
            chmod(bin + "/codex", 0o755)
            for slot in slots {
                accounts[slot] = try await env.signIn(slot, email: "\(slot)@example.com").account.accountID
            }
            #expect(try env.run("switch", "a").status == 0)
        }

        func environment(_ extra: [String: String]) -> [String: String] {
            ["PATH": bin + ":/usr/bin:/bin", "STANDIN_LOG": log].merging(extra) { $1 }
        }

        /// Starts `exec --follow ARGS -- codex` and waits for the stand-in to say it is ready.
        func start(
            _ args: [String],
            _ extra: [String: String] = [:]
        ) throws -> (process: Process, stdout: Pipe, stderr: Pipe, codexPID: pid_t) {
            let (p, stdout, stderr) = try env.home.start(
                ["exec", "--follow"] + args + ["--", "codex"],
                extraEnvironment: environment(extra)
            )
            var seen = ""
            while !seen.contains("\n") {
                let chunk = stdout.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += String(decoding: chunk, as: UTF8.self)
            }
            let words = seen.split(whereSeparator: \.isWhitespace)
            guard words.count >= 2, words[0] == "ready", let pid = pid_t(words[1]) else {
                throw ServerError(
                    "the stand-in did not start: \(seen) "
                        + "\(String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))"
                )
            }
            return (p, stdout, stderr, pid)
        }

        /// Waits for `exec` to end: its status and what it wrote to stderr.
        func finish(
            _ run: (process: Process, stdout: Pipe, stderr: Pipe, codexPID: pid_t)
        ) -> (status: Int32, stderr: String) {
            _ = run.stdout.fileHandleForReading.readDataToEndOfFile()
            let err = String(decoding: run.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            run.process.waitUntilExit()
            return (run.process.terminationStatus, err)
        }

        /// What the stand-ins recorded, in order.
        func records() throws -> [[String: Any]] {
            try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
        }

        var leftoverFolders: [String] {
            (try? FileManager.default.contentsOfDirectory(atPath: env.home.root + "/run/lanyard/exec")) ?? []
        }
    }

    @Test func aSwitchStopsCodexWithSIGINTAndResumesItsSessionAsTheNewSlot() async throws {
        let setup = try await Setup()
        let run = try setup.start(["--grace", "600"])
        #expect(try setup.env.run("switch", "b").status == 0)
        let (status, stderr) = setup.finish(run)
        #expect(status == 7, "the resumed Codex's status: \(stderr)")
        let records = try setup.records()
        let session = try #require(records.first { $0["event"] as? String == "session" }?["id"] as? String)
        #expect(records.map { $0["event"] as? String ?? "" } == ["start", "session", "signal", "start"], "\(records)")
        #expect(
            records[0]["argv"] as? [String] == [] && records[0]["slot"] as? String == "a"
                && records[0]["account"] as? String == setup.accounts["a"]
        )
        #expect(records[2]["signal"] as? String == "INT")
        #expect(records[3]["argv"] as? [String] == ["resume", session])
        #expect(records[3]["slot"] as? String == "b" && records[3]["account"] as? String == setup.accounts["b"])
        #expect(stderr.contains("lanyard: moving Codex from a to b (resuming session \(session))"), "\(stderr)")
        #expect(setup.leftoverFolders.isEmpty, "the private CODEX_HOME is removed")
    }

    /// The agent's auto-switch moves the active slot like `switch` does: a at its threshold when
    /// the agent starts, the agent switches to b, and Codex follows.
    @Test func anAutoSwitchAtALimitMovesCodexToo() async throws {
        let setup = try await Setup(extraConfig: "[switch]\nauto = usage\npoll = 3600")
        for (slot, used) in [("a", 96), ("b", 10)] {
            try await setup.env.server.hook(
                "/_test/usage",
                [
                    "account_id": try #require(setup.accounts[slot]),
                    "primary_window": [
                        "used_percent": used, "limit_window_seconds": 18000, "reset_after_seconds": 7200,
                    ],
                ]
            )
        }
        let run = try setup.start(["--grace", "600"])
        let (agent, _, agentErr) = try setup.env.home.start(["agent"])
        defer {
            agent.terminate()
            agent.waitUntilExit()
        }
        DispatchQueue.global().async { _ = agentErr.fileHandleForReading.readDataToEndOfFile() }  // never a full pipe
        let (status, stderr) = setup.finish(run)
        #expect(status == 7, "\(stderr)")
        let records = try setup.records()
        #expect(records.last?["argv"] as? [String] == ["resume", records[1]["id"] as? String ?? "?"], "\(records)")
        #expect(records.last?["slot"] as? String == "b" && records.last?["account"] as? String == setup.accounts["b"])
        #expect(stderr.contains("lanyard: moving Codex from a to b"), "\(stderr)")
    }

    @Test func codexThatIgnoresSIGINTGetsSIGTERMAfterTheGrace() async throws {
        let setup = try await Setup()
        let run = try setup.start(["--grace", "0.2"], ["STANDIN_MODE": "term"])
        #expect(try setup.env.run("switch", "b").status == 0)
        let (status, stderr) = setup.finish(run)
        #expect(status == 7, "\(stderr)")
        let records = try setup.records()
        #expect(
            records.map { $0["event"] as? String ?? "" } == ["start", "session", "signal", "signal", "start"],
            "\(records)"
        )
        #expect(records.compactMap { $0["signal"] as? String } == ["INT", "TERM"])
        #expect(records.last?["slot"] as? String == "b" && records.last?["account"] as? String == setup.accounts["b"])
    }

    @Test func codexThatIgnoresSIGTERMTooIsKilledAfterASecondGrace() async throws {
        let setup = try await Setup()
        let run = try setup.start(["--grace", "0.2"], ["STANDIN_MODE": "stubborn"])
        #expect(try setup.env.run("switch", "b").status == 0)
        let (status, stderr) = setup.finish(run)
        #expect(status == 7, "\(stderr)")
        let records = try setup.records()
        #expect(
            records.compactMap { $0["signal"] as? String } == ["INT", "TERM"],
            "SIGKILL cannot be caught: \(records)"
        )
        #expect(
            records.last?["argv"] as? [String] == ["resume", records[1]["id"] as? String ?? "?"]
                && records.last?["slot"] as? String == "b"
        )
    }

    /// Codex records a session at its first turn: before that there is nothing to resume, and the
    /// command starts again as given, as the new slot.
    @Test func withoutARecordedSessionTheCommandStartsAgainAsGiven() async throws {
        let setup = try await Setup()
        let run = try setup.start(["--grace", "600"], ["STANDIN_NO_SESSION": "1"])
        #expect(try setup.env.run("switch", "b").status == 0)
        // The second stand-in is not a resume: it waits; end it as Codex would end on /quit.
        var seen = ""
        while !seen.contains("ready") {
            let chunk = run.stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let records = (try? setup.records()) ?? []
        let second = try #require(
            seen.split(whereSeparator: \.isWhitespace).last.flatMap { pid_t($0) },
            """
            \(seen) \(String(decoding: run.stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)) \
            \(records)
            """
        )
        kill(second, SIGUSR1)
        let (status, stderr) = setup.finish(run)
        #expect(status == 0, "\(stderr)")
        let final = try setup.records()
        #expect(final.map { $0["event"] as? String ?? "" } == ["start", "signal", "start"], "\(final)")
        #expect(final.last?["argv"] as? [String] == [] && final.last?["slot"] as? String == "b")
        #expect(
            stderr.contains("lanyard: moving Codex from a to b (no session recorded yet: starting it again)"),
            "\(stderr)"
        )
    }

    @Test func codexEndingByItselfEndsExecWithItsStatus() async throws {
        let setup = try await Setup()
        let run = try setup.start([], ["STANDIN_EXIT": "5"])
        kill(run.codexPID, SIGUSR1)
        let (status, stderr) = setup.finish(run)
        #expect(status == 5, "\(stderr)")
        #expect(try setup.records().map { $0["event"] as? String ?? "" } == ["start", "session"])
        // Switching afterwards reaches nothing.
        #expect(try setup.env.run("switch", "b").status == 0)
        #expect(try setup.records().count == 2)
    }

    /// SIGTERM to `exec` is passed on to Codex, and a Codex that ends of it is not started again,
    /// even when a switch comes meanwhile.
    @Test func sigtermToExecEndsCodexForGood() async throws {
        let setup = try await Setup()
        let run = try setup.start(["--grace", "600"], ["STANDIN_MODE": "stubborn"])
        kill(run.process.processIdentifier, SIGTERM)
        // The stand-in's log is the event to wait for (it keeps running: stubborn).
        let recorded = try await eventually("the stand-in records SIGTERM") {
            ((try? setup.records()) ?? []).contains { $0["signal"] as? String == "TERM" }
        } until: {
            $0
        }
        #expect(recorded, "SIGTERM forwarded")
        #expect(try setup.env.run("switch", "b").status == 0)
        kill(run.codexPID, SIGUSR1)
        let (status, stderr) = setup.finish(run)
        #expect(status == 0, "\(stderr)")
        #expect(
            try setup.records().map { $0["event"] as? String ?? "" } == ["start", "session", "signal"],
            "no restart"
        )
    }

    @Test func aSwitchToASlotThatMustSignInLeavesCodexRunning() async throws {
        let setup = try await Setup(slots: ["a", "c"])
        try Registry(paths: setup.env.paths).updateInTest { $0.slots[try Slot("c")]?.state = .reauthenticationRequired }
        let run = try setup.start([], ["STANDIN_EXIT": "0"])
        #expect(try setup.env.run("switch", "c").status == 0)
        var said = ""
        while !said.contains("\n") {
            let chunk = run.stderr.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            said += String(decoding: chunk, as: UTF8.self)
        }
        #expect(said.contains("lanyard: did not move Codex to c (Codex kept running as a): "), "\(said)")
        kill(run.codexPID, SIGUSR1)
        let (status, rest) = setup.finish(run)
        #expect(status == 4, "exit status of reauthentication_required: \(said)\(rest)")
        #expect(
            rest.contains("did not move Codex to c"),
            "said again once Codex is gone, where the terminal is readable: \(rest)"
        )
        #expect(
            try setup.records().map { $0["event"] as? String ?? "" } == ["start", "session"],
            "never signalled, never started again"
        )
    }

    @Test func followNeedsCodexSlotAndGraceNeedsFollow() async throws {
        let setup = try await Setup(slots: ["a"])
        let grace = try setup.env.home.run(
            ["exec", "--grace", "1", "a", "--", "codex"],
            extraEnvironment: setup.environment([:])
        )
        #expect(grace.status == 2 && grace.stderr.contains("--grace goes with --follow"), "\(grace.stderr)")
        let bad = try setup.env.home.run(
            ["exec", "--follow", "--grace", "0", "a", "--", "codex"],
            extraEnvironment: setup.environment([:])
        )
        #expect(bad.status == 2 && bad.stderr.contains("--grace needs a number of seconds"), "\(bad.stderr)")
    }

    /// On a terminal: Ctrl-C reaches Codex and not lanyard, and a Codex stopped in raw mode leaves
    /// the terminal as it found it for the resumed one.
    @Test func onATerminalCtrlCGoesToCodexAndModesComeBack() async throws {
        let setup = try await Setup()
        let binary = builtBinary("lanyard")
        let environment = setup.env.home.environment.merging(
            setup.environment(["STANDIN_MODE": "keep", "CODEX_HOME": setup.env.codexHome])
        ) { $1 }
        // `exec` in the shell `script` runs: a shell waiting for lanyard would itself die of the
        // Ctrl-C, which is not what this test is about.
        let terminal = try TerminalRun(
            "exec",
            [binary, "exec", "--follow", "--grace", "0.5", "--", "codex"],
            environment: environment
        )
        try await terminal.waitUntilShown("ready")
        try terminal.type("\u{03}")  // Ctrl-C
        // The stand-in got it (and kept running, as Codex interrupting a turn does); lanyard
        // ignored it, so it is still there to follow a switch.
        let interrupted = try await eventually("the stand-in records SIGINT") {
            (try? setup.records().contains { $0["signal"] as? String == "INT" }) == true
        } until: {
            $0
        }
        #expect(interrupted, "\(terminal.text)")
        #expect(try setup.env.run("switch", "b").status == 0)
        let (status, text) = try await terminal.finish()
        #expect(status == 7, "\(text)")
        let records = try setup.records()
        #expect(
            records.compactMap { $0["signal"] as? String } == ["INT", "INT", "TERM"],
            "Ctrl-C, then lanyard's SIGINT and SIGTERM: \(records)"
        )
        #expect(
            records.last?["event"] as? String == "terminal" && records.last?["echo"] as? Bool == true,
            "the resumed Codex finds the terminal as it was before the first one set raw mode: \(records)"
        )
    }
}

@Suite struct CodexSessionTests {
    /// Codex names a session's file `rollout-TIMESTAMP-UUID.jsonl`; the newest by modification
    /// time is the one a running Codex is writing (a resumed session appends to its old file).
    @Test func theNewestRolloutFileNamesTheSession() throws {
        let testHome = TestHome()
        let home = testHome.root
        #expect(CodexSessions.newest(in: home) == nil)
        let older = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
        let newer = "0199a213-81c0-7800-8aa1-bbab2a035a53"
        for (day, id, age) in [("2026/12/03", older, 0.0), ("2026/12/04", newer, 100.0)] {
            let folder = home + "/sessions/" + day
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let file = folder + "/rollout-2026-12-04T12-00-00-\(id).jsonl"
            try Data("{}\n".utf8).write(to: URL(fileURLWithPath: file))
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSince1970: 1_800_000_000 + age)],
                ofItemAtPath: file
            )
        }
        try Data().write(to: URL(fileURLWithPath: home + "/sessions/2026/12/04/rollout-not-a-session.jsonl"))
        #expect(CodexSessions.newest(in: home) == newer)
        // Resuming the older one appends to it, which makes it the newest.
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: 1_800_000_200)],
            ofItemAtPath: home + "/sessions/2026/12/03/rollout-2026-12-04T12-00-00-\(older).jsonl"
        )
        #expect(CodexSessions.newest(in: home) == older)
        #expect(
            CodexSessions.sessionID(
                fromFileName: "rollout-2025-05-07T17-24-21-5973B6C0-94B8-487B-A530-2AEB6098AE0E.jsonl"
            ) == older
        )
        #expect(CodexSessions.sessionID(fromFileName: "rollout-x5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl") == nil)
        withExtendedLifetime(testHome) {}
    }
}

@Suite struct ExecCommandNamedLikeASlotTests {
    /// `lanyard exec work ls` (no `--`): every word is the command, and `work` is not on PATH. The
    /// message says `work` is a slot and shows the form with `--`; the status stays a shell's 127.
    @Test func aSlotNameAsTheCommandIsExplained() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("work", email: "work@example.com")
        #expect(try env.run("switch", "work").status == 0)
        let slot = try env.run("exec", "work", "ls", "my file")
        #expect(slot.status == 127)
        #expect(
            slot.stderr.contains("command not found: work (work is a slot: `lanyard exec work -- ls 'my file'`)"),
            "\(slot.stderr)"
        )
        let other = try env.run("exec", "nosuchprogram", "ls")
        #expect(
            other.status == 127 && other.stderr.contains("command not found: nosuchprogram")
                && !other.stderr.contains("is a slot"),
            "\(other.stderr)"
        )
        // The form it shows works.
        #expect(try env.run("exec", "work", "--", "true").status == 0)
    }
}
