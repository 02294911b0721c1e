import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardIntegrations
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// `kill -9` of `lanyard exec` used to leave its private CODEX_HOME (with the live refresh token
/// its command rotated there) behind for good: nothing found it, nothing copied the tokens back.
/// `doctor` and the next `exec` now recover such folders once neither exec nor its command is
/// alive, and leave alone any folder whose lock someone holds.
@Suite struct ExecFolderRecoveryTests {
    /// The command `exec` runs: rotates its tokens at the server and rewrites auth.json, as Codex
    /// does, keeps the new refresh token in $OUT/rotated, says `ready PID` and waits to be killed.
    static let rotateAndWait = """
        import json, os, sys, signal, urllib.request, datetime
        path = os.path.join(os.environ["CODEX_HOME"], "auth.json")
        auth = json.load(open(path))
        req = urllib.request.Request(sys.argv[1] + "/oauth/token", \
        method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"client_id": "app_EMoamEEZ73f0CkXaXp7hrann", "grant_type": "refresh_token",
                             "refresh_token": auth["tokens"]["refresh_token"]}).encode())
        new = json.load(urllib.request.urlopen(req))
        auth["tokens"].update({k: new[k] for k in ("access_token", "refresh_token", "id_token") if k in new})
        auth["last_refresh"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        json.dump(auth, open(path, "w"))
        open(os.path.join(os.environ["OUT"], "rotated"), "w").write(auth["tokens"]["refresh_token"])
        print("ready", os.getpid(), flush=True)
        signal.pause()
        """

    struct KilledExec {
        let exec: Process
        let folder: String
        let commandPID: pid_t
        let rotated: String
    }

    /// Runs `exec --account a` with the command above, then kills exec with SIGKILL: its command
    /// lives on, holding the folder's lock.
    static func killExec(_ env: IntegrationHome) throws -> KilledExec {
        let script = env.home.root + "/rotate-and-wait.py"
        let out = env.home.root + "/out"
        try rotateAndWait.write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let (p, stdout, stderr) = try env.home.start(
            ["exec", "--account", "a", "--", "/usr/bin/python3", script, env.server.baseURL.absoluteString],
            extraEnvironment: ["OUT": out]
        )
        var seen = ""
        while !seen.contains("\n") {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        kill(p.processIdentifier, SIGKILL)
        // Waits for exec to be gone without reaping it: Process sees a child end when every copy
        // of a socket it gave the child is closed, and the command holds one until it is killed.
        var info = siginfo_t()
        while waitid(P_PID, id_t(p.processIdentifier), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        let words = seen.split(separator: " ")
        guard words.count == 2, words[0] == "ready",
            let pid = pid_t(words[1].trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw ServerError(
                "the command did not start: \(seen) "
                    + "\(String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self))"
            )
        }
        let parent = env.home.root + "/run/lanyard/exec"
        let folders = try FileManager.default.contentsOfDirectory(atPath: parent)
        guard folders.count == 1, folders[0].hasPrefix("a.") else { throw ServerError("exec folders: \(folders)") }
        return KilledExec(
            exec: p,
            folder: parent + "/" + folders[0],
            commandPID: pid,
            rotated: try String(contentsOfFile: out + "/rotated", encoding: .utf8)
        )
    }

    /// Kills the command and waits until nobody holds the folder's lock (the kernel releases it
    /// once the last process holding it is gone); returns the lock, now held by the test.
    static func killCommand(_ killed: KilledExec) throws -> FileLock {
        kill(killed.commandPID, SIGKILL)
        let lock = try FileLock(path: killed.folder + "/" + ExecFolder.lockName)
        killed.exec.waitUntilExit()
        return lock
    }

    /// Doctor's report (IntegrationHome runs it without the test keyring's bus).
    static func doctorJSON(_ env: IntegrationHome) throws -> (status: Int32, json: [String: Any]) {
        let r = try env.home.run(["doctor", "--json"], extraEnvironment: ["CODEX_HOME": env.codexHome])
        return (r.status, (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any] ?? [:])
    }

    @Test func doctorCopiesBackTheTokensOfAKilledExecOnceNobodyHoldsItsFolder() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        let signedIn = try env.stored("a").tokens.refreshToken
        let killed = try Self.killExec(env)
        defer { kill(killed.commandPID, SIGKILL) }  // should an expectation throw first
        // Tokens are compared, never printed: an expectation that fails shows its operands.
        let rotatedByCommand = killed.rotated != signedIn
        #expect(rotatedByCommand, "the command rotated the tokens")

        // exec is gone, its command is not: the folder is in use.
        let whileCommandLives = try Self.doctorJSON(env)
        #expect(whileCommandLives.status == 0)
        #expect(whileCommandLives.json["repaired"] as? [String] == [])
        #expect(FileManager.default.fileExists(atPath: killed.folder + "/auth.json"))
        let untouched = try env.stored("a").tokens.refreshToken == signedIn
        #expect(untouched, "nothing copied back while the command lives")

        do {
            // The command is gone; the test holds the lock, as a live owner would.
            let held = try Self.killCommand(killed)
            let whileHeld = try Self.doctorJSON(env)
            #expect(whileHeld.json["repaired"] as? [String] == [])
            #expect((whileHeld.json["problems"] as? [String])?.isEmpty == true)
            #expect(FileManager.default.fileExists(atPath: killed.folder + "/auth.json"))
            let stillUntouched = try env.stored("a").tokens.refreshToken == signedIn
            #expect(stillUntouched, "nothing copied back while the lock is held")
            withExtendedLifetime(held) {}  // released here
        }

        // Nobody holds it: doctor (without --repair) copies the rotated tokens back and removes it.
        let name = PathText.lastComponent(of: killed.folder)
        let recovered = try Self.doctorJSON(env)
        #expect(recovered.status == 0)
        #expect(
            recovered.json["repaired"] as? [String] == [
                "copied the tokens a killed `lanyard exec` left in \(name) back into a, and removed the folder"
            ]
        )
        #expect((recovered.json["problems"] as? [String])?.isEmpty == true)
        #expect(!FileManager.default.fileExists(atPath: killed.folder))
        let copiedBack = try env.stored("a").tokens.refreshToken == killed.rotated
        #expect(copiedBack, "the rotated tokens were copied back")

        // The slot refreshes with the live token, not the spent one.
        #expect(try env.run("refresh", "a").status == 0)
        #expect(try await env.server.stat("refresh_reused") == 0)
        #expect(try Self.doctorJSON(env).json["repaired"] as? [String] == [])
    }

    @Test func theNextExecRecoversBeforeHandingOutTheSlot() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        let killed = try Self.killExec(env)
        _ = try Self.killCommand(killed)  // waits for the command to be gone, then lets go

        // The new command gets the rotated token, not the spent one the store still held.
        let expected = env.home.root + "/out/rotated"
        let check =
            "import json, os, sys; a = json.load(open(os.path.join(os.environ['CODEX_HOME'], 'auth.json'))); "
            + "sys.exit(0 if a['tokens']['refresh_token'] == open(sys.argv[1]).read() else 3)"
        let next = try env.run("exec", "--account", "a", "--", "/usr/bin/python3", "-c", check, expected)
        #expect(next.status == 0, "\(next.stderr)")
        let name = PathText.lastComponent(of: killed.folder)
        #expect(
            next.stderr.contains(
                "lanyard: copied the tokens a killed `lanyard exec` left "
                    + "in \(name) back into a, and removed the folder\n"
            )
        )
        #expect(try FileManager.default.contentsOfDirectory(atPath: env.home.root + "/run/lanyard/exec").isEmpty)
        let copiedBack = try env.stored("a").tokens.refreshToken == killed.rotated
        #expect(copiedBack, "the rotated tokens were copied back")
        #expect(try await env.server.stat("refresh_reused") == 0)
    }

    /// auth.json in `directory`, rotated at the server as Codex would rotate it.
    static func writeRotatedAuthJSON(_ env: IntegrationHome, slot: String, in directory: String) async throws -> String
    {
        try FileManager.default.createDirectory(
            atPath: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let credential = try env.stored(slot)
        var file = try CodexAuthFile(credential: credential, slot: try Slot(slot))
        var config = ProviderConfig.openAI
        config.issuer = env.server.baseURL
        let rotated = try await OpenAIProvider(config: config, transport: URLSessionTransport()).refresh(
            refreshToken: file.refreshToken
        )
        file.accessToken = rotated.accessToken
        file.refreshToken = try #require(rotated.refreshToken)
        file.idToken = rotated.idToken ?? file.idToken
        file.lastRefresh = Date()
        try CodexHome(directory: directory).write(file)
        return file.refreshToken
    }

    /// Folders made before exec took a lock: recovered only when older than the grace period and
    /// no process has them as its CODEX_HOME.
    @Test func aFolderWithoutALockIsRecoveredOnlyWhenOldAndUnused() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        let parent = env.home.root + "/run/lanyard/exec"
        let folder = parent + "/a.Old123"
        let rotated = try await Self.writeRotatedAuthJSON(env, slot: "a", in: folder)
        try FileManager.default.createDirectory(
            atPath: parent + "/Not A Slot.abcdef",
            withIntermediateDirectories: true
        )
        try Data().write(to: URL(fileURLWithPath: parent + "/notes.txt"))

        #expect(
            try Self.doctorJSON(env).json["repaired"] as? [String] == [],
            "made just now: it may be an exec starting"
        )
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -3600)],
            ofItemAtPath: folder
        )

        // A process whose CODEX_HOME is the folder (as an older exec's command has it).
        let user = Process()
        user.executableURL = URL(fileURLWithPath: "/bin/cat")
        user.environment = ["CODEX_HOME": folder]
        let input = Pipe()
        user.standardInput = input
        user.standardOutput = FileHandle.nullDevice
        try user.run()
        let inUse = try Self.doctorJSON(env)
        try input.fileHandleForWriting.close()
        user.waitUntilExit()
        #expect(inUse.json["repaired"] as? [String] == [], "a process uses it")
        let notYet = try env.stored("a").tokens.refreshToken != rotated
        #expect(notYet, "nothing copied back while a process uses the folder")

        let recovered = try env.run("doctor")
        #expect(recovered.status == 0, "\(recovered.stdout)")
        #expect(
            recovered.stdout.contains(
                "repaired: copied the tokens a killed `lanyard exec` left "
                    + "in a.Old123 back into a, and removed the folder\n"
            )
        )
        let copiedBack = try env.stored("a").tokens.refreshToken == rotated
        #expect(copiedBack, "the rotated tokens were copied back")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: parent).sorted() == ["Not A Slot.abcdef", "notes.txt"],
            "what is not Lanyard's stays"
        )
    }

    /// The slot a folder is named after may have changed since: renamed, the tokens follow the
    /// account; signed out, there is nothing to take them and the folder goes.
    @Test func tokensFollowARenamedSlotAndASignedOutSlotTakesNothing() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        try await env.signIn("b", email: "b@example.com")
        var folders: [String: String] = [:]
        var rotated: [String: String] = [:]
        for slot in ["a", "b"] {
            let folder = try ExecFolder.create(for: try Slot(slot), paths: env.paths)
            folders[slot] = folder.home.directory
            rotated[slot] = try await Self.writeRotatedAuthJSON(env, slot: slot, in: folder.home.directory)
            withExtendedLifetime(folder) {}  // its owner is gone once this loop turns
        }
        #expect(try env.run("rename", "a", "c").status == 0)
        #expect(try env.run("logout", "b").status == 0)

        let r = try Self.doctorJSON(env)
        #expect(r.status == 0, "\(r.json)")
        let a = PathText.lastComponent(of: folders["a"] ?? "")
        let b = PathText.lastComponent(of: folders["b"] ?? "")
        #expect(
            r.json["repaired"] as? [String] == [
                "copied the tokens a killed `lanyard exec` left in \(a) back into c, and removed the folder",
                "removed \(b), left by a killed `lanyard exec` (nothing newer to copy back)",
            ],
            "in the folders' name order"
        )
        let followed = try env.stored("c").tokens.refreshToken == rotated["a"]
        #expect(followed, "the renamed slot took the rotated tokens")
        #expect(try FileManager.default.contentsOfDirectory(atPath: env.home.root + "/run/lanyard/exec").isEmpty)
    }

    /// A folder whose tokens cannot be copied back stays, and doctor says so (exit 1) each time.
    @Test func aFolderThatCannotBeRecoveredStaysAndIsReported() async throws {
        let env = try await IntegrationHome()
        try await env.signIn("a", email: "a@example.com")
        let path: String
        do {
            let folder = try ExecFolder.create(for: try Slot("a"), paths: env.paths)
            path = folder.home.directory
            try Data("{\"tokens\": ".utf8).write(to: URL(fileURLWithPath: path + "/auth.json"))
            withExtendedLifetime(folder) {}  // its owner is gone from here on
        }

        for _ in 0..<2 {
            let r = try Self.doctorJSON(env)
            #expect(r.status == 1)
            #expect(r.json["repaired"] as? [String] == [])
            let problems = r.json["problems"] as? [String] ?? []
            #expect(
                problems.count == 1
                    && problems[0].hasPrefix(
                        "a killed `lanyard exec` left tokens in \(path) that could not be copied back ("
                    ),
                "\(problems)"
            )
            #expect(problems.first?.hasSuffix("); the folder stays until this succeeds") == true)
            #expect(FileManager.default.fileExists(atPath: path + "/auth.json"))
        }
    }
}
