import Foundation
import LanyardAuth
import LanyardCLI
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// `lanyard login --browser` (and the browser by default on a desktop session) against the ChatGPT
/// emulator. On a "desktop" the browser is a stand-in `xdg-open` that fetches the URL with curl,
/// following the emulator's redirect to the listener, as a browser would; without one, the test
/// reads the URL the real `lanyard` process prints and pastes the redirect's address on its
/// standard input. Every run listens on a port of its own (`LANYARD_TEST_CALLBACK_PORTS`).
@Suite struct BrowserLoginTests {
    struct Rig {
        let h = CLIHarness()
        let emulator: OAuthTestServer
        let ports: [UInt16]

        init(ports count: Int = 1, desktop: Bool = true) async throws {
            ports = try (0..<count).map { _ in try freeLoopbackPort() }
            emulator = try OAuthTestServer(.chatgptEmulator, arguments: registeredRedirects(ports))
            h.realStores = true
            try h.writeConfig(LoginRig.config(emulator: emulator, device: nil, backend: "file"))
            let initialised = await h.run("store", "init", "--no-passphrase")
            try #require(initialised.status == 0, "\(initialised.stderr)")
            h.extraEnvironment["LANYARD_TEST_CALLBACK_PORTS"] = ports.map(String.init).joined(separator: ",")
            if desktop {
                // The "browser": xdg-open fetches the page and follows the redirects, in the
                // background as xdg-open does.
                let bin = h.root + "/bin"
                try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
                try "#!/bin/sh\nexec /usr/bin/curl -sS -L -o /dev/null --max-time 60 \"$1\"\n"
                    .write(toFile: bin + "/xdg-open", atomically: true, encoding: .utf8)
                chmod(bin + "/xdg-open", 0o755)
                h.extraEnvironment["PATH"] = bin + ":/usr/bin:/bin"
                h.extraEnvironment["DISPLAY"] = ":0"
            }
        }
    }

    /// On a desktop, plain `login` signs in through the browser: the URL shown and opened, the
    /// device code named as the alternative, the slot stored; no token or code in the output.
    @Test func desktopLoginUsesTheBrowser() async throws {
        let rig = try await Rig()
        let h = rig.h
        try await rig.emulator.hook("/_test/browser", ["email": "alice@example.com", "plan": "pro"])
        let r = await h.run("login", "work")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "Signed alice@example.com (Pro) into slot work.\n")
        #expect(
            r.stderr.contains(
                "Opening the browser to sign in; if it does not open, open this address:\n\n    "
                    + "\(rig.emulator.baseURL.absoluteString)/oauth/authorize?response_type=code&client_id="
            )
        )
        #expect(r.stderr.contains("&redirect_uri=http%3A%2F%2Flocalhost%3A\(rig.ports[0])%2Fauth%2Fcallback&"))
        #expect(r.stderr.contains("(`lanyard login --device` signs in with a device code instead.)"))
        #expect(!r.stderr.contains("enter the code"))
        let credential = try h.fileStore.get(try Slot("work"))
        #expect(credential.account.email == "alice@example.com")
        #expect(
            try h.registry.loadInTest().slots[try Slot("work")]?.state
                == .signedIn(expiresAt: credential.tokens.expiresAt)
        )
        for secret in [credential.tokens.accessToken, credential.tokens.refreshToken, credential.tokens.idToken]
            .compactMap({ $0 })
        {
            #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret))
        }
        #expect(!r.stderr.contains("code=ac_") && !r.stdout.contains("ac_"))
        #expect(try await rig.emulator.stat("usercodes_issued") == 0)
    }

    /// `--device` forces the device code on a desktop; `--browser` with `--device`, `--qr` or
    /// `--open` is a usage error that starts nothing.
    @Test func deviceFlagAndConflicts() async throws {
        let rig = try await Rig()
        let h = rig.h
        let r = await h.run(
            ["login", "work", "--device"],
            sleeper: TestSleeper(clock: h.clock) { n in
                if n == 1 { try await rig.emulator.hook("/_test/approve", ["email": "dev@example.com"]) }
            }
        )
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("and enter the code:") && !r.stderr.contains("/oauth/authorize"))
        for flags in [["--browser", "--device"], ["--browser", "--qr"], ["--browser", "--open"]] {
            let bad = await h.run(["login", "other"] + flags)
            #expect(bad.status == 2, "\(flags): \(bad.stderr)")
        }
        #expect(try await rig.emulator.stat("authorize_requests") == 0)
        #expect(try await rig.emulator.stat("usercodes_issued") == 1)
    }

    /// Cancel pressed in the browser: exit 1 with `authorization_denied`, the server's description
    /// escaped, nothing stored.
    @Test func denialInTheBrowser() async throws {
        let rig = try await Rig()
        let h = rig.h
        try await rig.emulator.hook(
            "/_test/browser",
            ["action": "deny", "error_description": "denied \u{1B}]0;owned\u{07}here"]
        )
        let before = h.storedBytes()
        let r = await h.run("login", "work", "--json")
        #expect(r.status == 1, "\(r.stderr)")
        let error = r.json["error"] as? [String: Any]
        #expect(error?["code"] as? String == "authorization_denied")
        let message = error?["message"] as? String ?? ""
        #expect(message.contains("access_denied: denied \\u{1B}]0;owned\\u{7}here"), "\(message)")
        #expect(!r.stderr.contains("\u{1B}]") && !r.stdout.contains("\u{1B}]"))
        #expect(h.storedBytes() == before)
    }

    /// Both ports taken (another sign-in waits on them): exit 1, `callback_port_in_use`, with
    /// what to do; nothing stored, nothing asked of the server.
    @Test func portsTaken() async throws {
        let rig = try await Rig(ports: 2)
        let h = rig.h
        let held = try rig.ports.map { try CallbackListener.bind(ports: [$0]) }
        defer { for listener in held { listener.close() } }
        let before = h.storedBytes()
        let r = await h.run("login", "work", "--browser")
        #expect(r.status == 1)
        #expect(
            r.stderr.contains("another program listens on 127.0.0.1 or ::1 ports \(rig.ports[0]) and \(rig.ports[1])")
        )
        #expect(
            r.stderr.contains(
                "Finish or cancel that sign-in and run this one again, "
                    + "or sign in with a device code: `lanyard login --device`"
            )
        )
        let json = await h.run("login", "work", "--browser", "--json")
        #expect((json.json["error"] as? [String: Any])?["code"] as? String == "callback_port_in_use")
        #expect(h.storedBytes() == before)
        #expect(try await rig.emulator.stat("authorize_requests") == 0)
    }

    /// No desktop: `login --browser` prints the URL and reads the pasted redirect address from
    /// standard input (a real process, a real pipe); the code is used once.
    @Test func pastedRedirectOverStandardInput() async throws {
        let rig = try await Rig(desktop: false)
        let h = rig.h
        try await rig.emulator.hook("/_test/browser", ["email": "remote@example.com", "plan": "plus"])
        var environment = h.environment
        environment["PATH"] = "/usr/bin:/bin"
        environment["DISPLAY"] = nil
        environment["WAYLAND_DISPLAY"] = nil
        let binary = lanyardBinary()
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build lanyard first (\(binary))")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["login", "--browser", "--json"]
        p.environment = environment
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = input
        try p.run()
        // Reads stderr up to the line with the URL (bounded: the process prints it at once).
        let errors = err.fileHandleForReading
        let shown: String = await BlockingExecutor.shared.run {
            var text = ""
            while !text.contains("paste it here.\n") {
                let chunk = errors.availableData  // what has come, waiting only when nothing has
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }
        let url = try #require(shown.split(separator: "\n").first { $0.hasPrefix("    http") }).trimmingCharacters(
            in: .whitespaces
        )
        #expect(shown.contains("To sign in, open this address in a browser (on any machine):"))
        #expect(shown.contains("The browser is then sent to http://localhost:\(rig.ports[0])/auth/callback?code=…"))
        // The browser on the other machine lands on a page that does not load; its address is pasted.
        let visit = try await browse(url, follow: false)
        let location = try #require(visit.location)
        input.fileHandleForWriting.write(Data((location + "\n").utf8))
        try input.fileHandleForWriting.close()
        let (status, stdout, rest) = await BlockingExecutor.shared.run { () -> (Int32, String, String) in
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = errors.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        }
        #expect(status == 0, "\(shown)\(rest)")
        let json = (try? JSONSerialization.jsonObject(with: Data(stdout.utf8))) as? [String: Any] ?? [:]
        #expect(json["slot"] as? String == "remote" && json["email"] as? String == "remote@example.com")
        let code = try #require(CallbackRequest.parameters(String(location.split(separator: "?")[1]))["code"])
        #expect(!stdout.contains(code) && !shown.contains(code) && !rest.contains(code))
        let credential = try h.fileStore.get(try Slot("remote"))
        #expect(!stdout.contains(credential.tokens.accessToken) && !rest.contains(credential.tokens.accessToken))
        #expect(try await rig.emulator.stat("code_exchanges") == 1)
        // The emulator refuses the used code.
        let provider = OpenAIProvider(
            config: try #require(try h.accountManager().config.providers["openai"]),
            transport: URLSessionTransport()
        )
        do throws(AuthError) {
            _ = try await provider.exchange(
                code: code,
                verifier: PKCE().verifier,
                redirectURI: "http://localhost:\(rig.ports[0])/auth/callback"
            )
            Issue.record("a used code was accepted")
        } catch {
            #expect(error.code == .tokenExchangeRefused)
        }
    }
}
