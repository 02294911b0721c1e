import FoundationEssentials
import Glibc
import LanyardAuth
import LanyardCore
import LanyardStore
import LanyardSupport
import LanyardSystem

extension AuthCommands {
    static let login = CommandSpec(
        name: "login",
        summary: "sign an account into a slot through the browser or with a device code",
        arguments: "[SLOT]",
        minArguments: 0,
        maxArguments: 1,
        flags: [
            FlagSpec(
                "provider",
                short: "p",
                value: "NAME",
                "the provider from config (default: the slot's, else openai)"
            ),
            FlagSpec("browser", "sign in through the browser (the default on a desktop session)"),
            FlagSpec("device", "sign in with a device code (the default without a desktop session)"),
            FlagSpec("open", "open the verification page with xdg-open"),
            FlagSpec("qr", "draw a QR code of the verification URL"),
            FlagSpec("replace", "let the sign-in put another account into an existing SLOT"),
            FlagSpec(
                "with-access-token",
                "store a ChatGPT personal access token read from standard input (never refreshed)"
            ),
        ],
        prints: true,
        takesAccount: false,
        details: """
            On a desktop session (DISPLAY or WAYLAND_DISPLAY, and xdg-open) the sign-in opens the browser and \
            waits for it on 127.0.0.1 (ChatGPT: port 1455, else 1457); elsewhere it shows a device code. With \
            --browser and no desktop, open the printed address on any machine and paste back the address the \
            browser ends on. Without SLOT the slot is named after the account's email. \
            Signing in again to an existing slot replaces \
            its credential only once the new one is in hand, and only with the same account: approved as another \
            account, the slot keeps its account and the sign-in is kept in a new slot named after its email (said so), \
            unless --replace is given. Ctrl-C cancels (exit 130) and stores nothing. \
            --with-access-token stores a ChatGPT personal access token (at-…) read from standard input (a pipe, or a \
            prompt that does not echo it) instead: its account comes from the server, and it is never refreshed.
            """,
        examples: [
            CommandExample("lanyard login", "sign in; the slot is named after the account's email"),
            CommandExample(
                "lanyard login work --browser",
                "sign into the slot work through the browser (paste the address back over SSH)"
            ),
            CommandExample(
                "lanyard login work --device --qr",
                "sign in with a device code, with a QR code of the page for a phone"
            ),
            CommandExample(
                "lanyard login lab --provider example",
                "sign in with a provider of your own ([provider.example] in config.ini)"
            ),
            CommandExample("lanyard login work --replace", "put another account into work, replacing the one it holds"),
            CommandExample(
                "printenv CODEX_ACCESS_TOKEN | lanyard login ci --with-access-token",
                "store a personal access token (at-…) in the slot ci; it never rotates"
            ),
        ],
        network: true
    ) { inv in
        if inv.args.has("with-access-token") { return try loginWithAccessToken(inv) }
        let manager = try inv.accounts()
        let requested = try inv.args.positionals.first.map { try SlotCommands.parseSlot($0, inv) }
        let existing = try requested.flatMap { try inv.registry.load().slots[$0] }
        let providerID = inv.args.value("provider") ?? existing?.provider ?? "openai"
        let config = manager.config
        let progress = SignInProgress(inv: inv)
        // Clear the countdown line however the sign-in ends, so an error starts on a clean line.
        defer { progress.finish() }
        let unlock: (@Sendable () throws -> Void)? =
            inv.mayAskForPassphrase ? { @Sendable in try inv.unlockFileStoreOnTerminal() } : nil
        let method = try SignInProgress.method(inv, offersBrowser: manager.offersBrowserSignIn(providerID: providerID))
        let (slot, credential) = try inv.runAsync {
            try await manager.signIn(
                slot: requested,
                providerID: providerID,
                replacingAnotherAccount: inv.args.has("replace"),
                unlockFileStore: unlock,
                method: method,
                flow: { flow in
                    flow.slowDownIncrement = config.slowDownIncrement
                    if let timeout = config.loginTimeout { flow.maximumDuration = timeout }
                },
                events: { progress.handle($0) }
            )
        }
        progress.finish()
        let account = credential.account
        // A slot holding another account keeps it; the sign-in went to a slot of its own.
        let insteadOf = requested.flatMap { $0 == slot ? nil : $0 }
        inv.emit(
            LoginView(
                slot: slot,
                provider: providerID,
                account: account,
                expiresAt: credential.tokens.expiresAt,
                insteadOf: insteadOf
            )
        ) {
            let who = account.email ?? "the account"
            let plan = account.plan.map { " (\($0.displayName))" } ?? ""
            inv.stdout.line("Signed \(who)\(plan) into slot \(inv.style.bold(slot.name)).")
        }
        return .ok
    }
}

extension AuthCommands {
    /// `login --with-access-token`: the token from standard input (a pipe, or typed at a prompt
    /// that does not echo it), never from the command line.
    static func loginWithAccessToken(_ inv: Invocation) throws -> ExitStatus {
        for flag in ["open", "qr", "browser", "device"] where inv.args.has(flag) {
            throw UsageError(
                message: "--\(flag) is a way to sign in; --with-access-token stores a token instead",
                command: "login"
            )
        }
        // A token given as an argument is refused before anything else, and never repeated.
        if let given = inv.args.positionals.first, ArgumentText.looksSecret(given) {
            throw UsageError(
                message: "--with-access-token reads the token from standard input, never from the command line (where "
                    + "`ps` and your shell's history see it): "
                    + "`printenv CODEX_ACCESS_TOKEN | lanyard login SLOT --with-access-token`",
                command: "login"
            )
        }
        let manager = try inv.accounts()
        let requested = try inv.args.positionals.first.map { try SlotCommands.parseSlot($0, inv) }
        let existing = try requested.flatMap { try inv.registry.load().slots[$0] }
        let providerID = inv.args.value("provider") ?? existing?.provider ?? "openai"
        let token: String
        if inv.context.stdinIsTTY {
            // An empty answer is the library's to refuse, with the way to pipe one in.
            token =
                (try? PassphraseReader(environment: inv.context.environment).terminal(
                    prompt: "Access token (not shown): "
                )) ?? ""
        } else {
            do { token = try inv.context.input.line(maxBytes: 16_384) ?? "" } catch {
                throw AccessTokenError.malformed(error.problem)
            }
        }
        let unlock: (@Sendable () throws -> Void)? =
            inv.mayAskForPassphrase ? { @Sendable in try inv.unlockFileStoreOnTerminal() } : nil
        let progress = SignInProgress(inv: inv)
        let (slot, credential) = try inv.runAsync {
            try await manager.signIn(
                slot: requested,
                providerID: providerID,
                accessToken: token,
                replacingAnotherAccount: inv.args.has("replace"),
                unlockFileStore: unlock,
                events: { progress.handle($0) }
            )
        }
        let account = credential.account
        inv.emit(LoginView(slot: slot, provider: providerID, account: account, expiresAt: nil)) {
            let who = account.email ?? account.accountID ?? "the account"
            let plan = account.plan.map { " (\($0.displayName))" } ?? ""
            inv.stdout.line(
                "Stored a personal access token of \(who)\(plan) in slot "
                    + "\(inv.style.bold(slot.name)); it does not rotate, "
                    + "so nothing refreshes it."
            )
        }
        return .ok
    }
}

/// Shows the device code and a countdown on stderr while `login` polls.
final class SignInProgress: Sendable {
    let inv: Invocation
    /// When the last plain (non-TTY) countdown line went out, and whether a TTY countdown is shown.
    private let shown = Locked((lastPlainLine: Date.distantPast, countdown: false))

    init(inv: Invocation) { self.inv = inv }

    func handle(_ event: SignInEvent) {
        shown.withLock { shown in
            let err = inv.stderr
            let s = inv.errorStyle
            switch event {
            case .deviceCode(let auth):
                let url = auth.verificationURL.absoluteString
                err.line("To sign in, open \(s.bold(url))")
                if let complete = auth.completeVerificationURL {
                    err.line("  (or \(complete.absoluteString), with the code filled in)")
                }
                err.line("and enter the code:\n\n    \(s.bold(auth.userCode))\n")
                if inv.args.has("qr"),
                    let qr = QRCode.render((auth.completeVerificationURL ?? auth.verificationURL).absoluteString)
                {
                    err.raw(qr)  // block characters drawn here, from the URL's bits
                }
                if inv.args.has("open") {
                    Self.open(
                        auth.completeVerificationURL ?? auth.verificationURL,
                        err: err,
                        environment: inv.context.environment
                    )
                }
            case .waiting(let remaining):
                let text = "Waiting for approval… \(RelativeTime.span(remaining)) left (Ctrl-C cancels)"
                if inv.context.stderrIsTTY {
                    err.write(.control(.eraseLine) + "\(text)")
                    shown.countdown = true
                } else if inv.now.timeIntervalSince(shown.lastPlainLine) >= 30 {
                    err.line("\(text)")
                    shown.lastPlainLine = inv.now
                }
            case .retrying(let reason, let delay):
                // A line of its own, above the countdown, which is redrawn below it: a reason that
                // wrapped on the countdown line would leave its first rows behind at each redraw.
                if inv.context.stderrIsTTY { err.write(.control(.eraseLine)) }
                err.line("\(reason); retrying in \(RelativeTime.span(delay))")
            case .slowedDown(let interval):
                if !inv.context.stderrIsTTY {
                    err.line("The server asked to poll less often; now every \(Int(interval)) s.")
                }
            case .shared(let outcome):
                if inv.context.stderrIsTTY { err.write(.control(.eraseLine)) }
                switch outcome {
                case .written(let fleet):
                    err.line("Written to fleet \(fleet): every member machine uses this sign-in from now on.")
                case .pending(let fleet, let reason):
                    err.line(
                        "lanyard: fleet \(fleet) did not take the new sign-in (\(reason)); it is kept here and written "
                            + "on the next refresh, `lanyard fleet sync` or by the agent"
                    )
                case .unshared(let fleet):
                    err.line("The slot is no longer shared in fleet \(fleet): this sign-in is this machine's own.")
                }
            case .storedInNewSlot(let requested, let holds, let slot):
                if inv.context.stderrIsTTY { err.write(.control(.eraseLine)) }
                err.line(
                    "Slot \(requested.name) holds \(holds), another account: "
                        + "this sign-in is kept in the slot \(s.bold(slot.name)) "
                        + "instead (`lanyard login \(requested.name) --replace` puts it into \(requested.name))."
                )
            case .browserAuthorization(let auth):
                let url = auth.url.absoluteString
                if auth.readsPastedRedirect {
                    err.line("To sign in, open this address in a browser (on any machine):\n\n    \(url)\n")
                    err.line(
                        "The browser is then sent to \(auth.redirectURI)?code=…; "
                            + "if that page does not load (the browser is on "
                            + "another machine), copy the whole address from its address bar and paste it here."
                    )
                } else {
                    err.line("Opening the browser to sign in; if it does not open, open this address:\n\n    \(url)\n")
                    err.line("(`lanyard login --device` signs in with a device code instead.)")
                    Self.open(auth.url, what: "the sign-in page", err: err, environment: inv.context.environment)
                }
                err.line("Waiting for the browser… (Ctrl-C cancels)")
            case .callbackRejected(let reason):
                err.line("lanyard: \(reason)")
            case .state: break
            }
        }
    }

    /// The test suites' ports for the browser sign-in's listener (comma-separated), since tests
    /// run in parallel and the registered ports are one machine-wide pair. Not for users: ChatGPT
    /// refuses any redirect but its registered ports.
    static let testPortsVariable = "LANYARD_TEST_CALLBACK_PORTS"

    /// Whether a browser can be opened here: a graphical session and xdg-open.
    static func canOpenBrowser(_ environment: [String: String]) -> Bool {
        let display = [environment["DISPLAY"], environment["WAYLAND_DISPLAY"]].contains { !($0 ?? "").isEmpty }
        return display && Spawn.searchPath("xdg-open", environment["PATH"] ?? "/usr/bin:/bin") != nil
    }

    /// How `login` signs in: `--browser` or `--device` when given; else the browser on a desktop
    /// session when the provider offers it, the device code otherwise (and with `--open`/`--qr`,
    /// which are the device code's). Without a browser here, the browser sign-in reads the
    /// redirect's address pasted on standard input.
    static func method(_ inv: Invocation, offersBrowser: Bool) throws -> SignInMethod {
        let browser = inv.args.has("browser")
        let device = inv.args.has("device")
        if browser && device {
            throw UsageErrorText("--browser and --device choose one way to sign in; give one of them")
        }
        if browser, let flag = ["open", "qr"].first(where: { inv.args.has($0) }) {
            throw UsageErrorText(
                "--\(flag) is for the device code; the browser sign-in "
                    + "opens the page itself (or use --device --\(flag))"
            )
        }
        let environment = inv.context.environment
        let desktop = canOpenBrowser(environment)
        guard browser || (!device && !inv.args.has("open") && !inv.args.has("qr") && desktop && offersBrowser) else {
            return .deviceCode
        }
        var ports: [UInt16]?
        if let raw = environment[testPortsVariable] {
            ports = raw.split(separator: ",").compactMap { UInt16($0.trimmingSpaces()) }
            guard ports?.isEmpty == false else {
                throw UsageErrorText("\(testPortsVariable) must list port numbers, separated by commas")
            }
        }
        let input = inv.context.input
        let pasted: (@Sendable () throws -> String?)? =
            desktop ? nil : { @Sendable () throws -> String? in try input.line(maxBytes: 8192) }
        return .browser(BrowserSignInOptions(ports: ports, pastedLine: pasted))
    }

    func finish() {
        shown.withLock { shown in
            if shown.countdown { inv.stderr.write(.control(.eraseLine)) }
            shown.countdown = false
        }
    }

    /// Hands a page (`what`) to xdg-open: only an `https://` URL (or `http://` to this machine),
    /// so a server or a config cannot make it open a file, run `javascript:` or pass an option
    /// (xdg-open refuses `--`, so the URL's scheme is what keeps it from looking like one).
    static func open(_ url: URL, what: String = "the verification page", err: TextSink, environment: [String: String]) {
        guard Loopback.isSecureOrLocal(url), !url.absoluteString.hasPrefix("-") else {
            err.line(
                "lanyard: not opening \(what): the server gave a URL that is not https; "
                    + "open it yourself if you trust it"
            )
            return
        }
        guard let xdgOpen = Spawn.searchPath("xdg-open", environment["PATH"] ?? "/usr/bin:/bin") else {
            err.line("lanyard: could not open a browser (xdg-open is not installed); open the URL above yourself")
            return
        }
        do {
            try Subprocess.run(xdgOpen, [url.absoluteString], stdout: .discard, stderr: .discard, wait: false)
        } catch {
            err.line("lanyard: could not open a browser (\(error.userFacingDescription)); open the URL above yourself")
        }
    }
}

/// `login --json`: the account signed in; unknown values are left out.
struct LoginView: JSONView {
    static let keys = [
        "slot", "provider", "email", "plan", "plan_name", "account_id", "fedramp", "expires_at", "instead_of",
    ]
    static let optionalKeys: Set<String> = ["email", "plan", "plan_name", "account_id", "expires_at", "instead_of"]
    let slot: Slot
    let provider: String
    let account: AccountInfo
    let expiresAt: Date?
    /// The slot asked for, when it held another account and the sign-in went to `slot` instead.
    var insteadOf: Slot? = nil
    var json: JSONValue {
        JSONValue.object([
            "slot": .string(slot.name), "provider": .string(provider), "email": .optional(account.email),
            "plan": .optional(account.plan?.rawValue), "plan_name": .optional(account.plan?.displayName),
            "account_id": .optional(account.accountID), "fedramp": .bool(account.isFedRAMPAccount),
            "expires_at": .date(expiresAt), "instead_of": .optional(insteadOf?.name),
        ]).droppingNulls
    }
}
