import Foundation
import LanyardAuth
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

/// The file store sealed by a TPM 2.0 (`store init --tpm`, `store seal --tpm`), against a real
/// software TPM: each test starts swtpm with a fresh state of its own (``SoftwareTPM``) and runs
/// the built `lanyard` with `TPM2TOOLS_TCTI` pointing at it. Stock `age` opens the store with the
/// recovery key, and tpm2-tools unseal the identity on their own (an independent reader of
/// `identity.tpm`). Under plain `swift test` without swtpm the suite skips, saying why; under
/// make test (LANYARD_TEST_TPM=1) a missing swtpm fails it.
@Suite(.enabled(if: SoftwareTPM.shouldRun, Comment(rawValue: SoftwareTPM.skipReason)))
struct TPMStoreTests {
    /// `store init --tpm` seals the identity (nothing in clear under the home); `token` with the
    /// kernel-keyring cache purged and no stdin unseals it; while it is cached the TPM is not
    /// needed; with the TPM stopped and the cache purged `token` exits 5 and nothing changes;
    /// once the TPM is back it works again.
    @Test func initTokenWithTheCachePurgedAndTheTPMStoppedAndBack() async throws {
        let h = try TPMHome()
        let initialized = try h.run("store", "init", "--tpm", "--recovery-file", h.outside + "/recovery.txt")
        #expect(initialized.status == 0, "\(initialized.stderr)")
        #expect(initialized.stdout.isEmpty, "the recovery key went to a file, so stdout is empty")
        #expect(initialized.stderr.contains("keep it offline"), "\(initialized.stderr)")
        #expect(
            permissionBits(h.outside + "/recovery.txt") == 0o600 && permissionBits(h.data + "/identity.tpm") == 0o600
        )
        #expect(
            !FileManager.default.fileExists(atPath: h.data + "/identity.txt")
                && !FileManager.default.fileExists(atPath: h.data + "/identity.age")
        )
        try await h.importAlpha()
        #expect(
            h.filesHoldingAnIdentity().isEmpty,
            "an age identity in clear under the home: \(h.filesHoldingAnIdentity())"
        )

        #expect(try h.run("store", "lock").status == 0)
        let cold = try h.run("token", "alpha", extra: ["LD_DEBUG": "files"])
        #expect(cold.status == 0 && cold.stdout == "AT-alpha-SECRET\n", "\(cold.stderr.suffix(300))")
        #expect(Self.loaded(cold).contains { $0.hasPrefix("libtss2-esys.so") }, "the cold unseal did not load libtss2")

        // Cached now: the hot path does not touch the TPM, nor load libtss2.
        h.tpm.stop()
        let hot = try h.run("token", "alpha", extra: ["LD_DEBUG": "files"])
        #expect(
            hot.status == 0 && hot.stdout == "AT-alpha-SECRET\n",
            "token needed the TPM while the identity was cached: \(hot.stderr.suffix(300))"
        )
        #expect(
            !Self.loaded(hot).contains { $0.hasPrefix("libtss2") },
            "a cached token loaded libtss2: \(Self.loaded(hot).sorted())"
        )

        #expect(try h.run("store", "lock").status == 0)
        let before = h.snapshot()
        let stopped = try h.run("token", "alpha", "--json")
        #expect(stopped.status == 5, "\(stopped.stdout) \(stopped.stderr)")
        #expect(
            stopped.stdout.contains("\"tpm_unavailable\"") && stopped.stdout.contains("no TPM answers at swtpm:"),
            "\(stopped.stdout)"
        )
        #expect(!stopped.stdout.contains("SECRET"))
        #expect(h.snapshot() == before, "a TPM that does not answer changed the store's files")

        try h.tpm.start()
        let back = try h.run("token", "alpha")
        #expect(back.status == 0 && back.stdout == "AT-alpha-SECRET\n", "\(back.stderr)")
        let status = try h.run("store", "status", "--json")
        #expect(
            status.stdout.contains("\"tpm\": true") && status.stdout.contains("\"passphrase\": false"),
            "\(status.stdout)"
        )
    }

    /// The libraries the dynamic loader opened (LD_DEBUG=files output on stderr).
    static func loaded(_ output: TestHome.Output) -> Set<String> {
        var names = Set<String>()
        for line in output.stderr.split(separator: "\n") where line.contains("file=") {
            guard let start = line.range(of: "file=")?.upperBound else { continue }
            names.insert(String(line[start...].prefix { !$0.isWhitespace && $0 != "[" && $0 != ";" }))
        }
        return names
    }

    /// The recovery key printed on stdout by `store init --tpm` opens the store with stock `age`,
    /// and so does one written with --recovery-file, and the user's own --recovery-recipient.
    @Test func recoveryKeysOpenTheStoreWithStockAge() async throws {
        let h = try TPMHome()
        let (ownKey, ownRecipient) = try BundleTests().keygen(h.outside)
        let initialized = try h.run("store", "init", "--tpm", "--recovery-recipient", ownRecipient)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        #expect(initialized.stdout.isEmpty, "only --recovery-recipient: no new key")
        try await h.importAlpha()
        for key in [ownKey] {
            let (status, out, err) = try runProcess("/usr/bin/age", ["-d", "-i", key, h.data + "/store.age"])
            #expect(status == 0 && out.contains("AT-alpha-SECRET"), "age -d -i recovery key: \(err)")
        }

        let printed = try TPMHome()
        let made = try printed.run("store", "init", "--tpm")
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout.hasPrefix("# Lanyard recovery key") && made.stdout.contains("AGE-SECRET-KEY-1"))
        #expect(
            made.stderr.contains("keep it offline") && !made.stderr.contains("AGE-SECRET-KEY"),
            "the key goes to stdout only"
        )
        try made.stdout.write(toFile: printed.outside + "/printed.txt", atomically: true, encoding: .utf8)
        try await printed.importAlpha()
        let (status, out, err) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", printed.outside + "/printed.txt", printed.data + "/store.age"]
        )
        #expect(status == 0 && out.contains("AT-alpha-SECRET"), "age -d -i (the printed key): \(err)")
        let doctor = try printed.run("doctor")
        #expect(
            doctor.stdout.contains("recovery recipients") && doctor.stdout.contains("storage key is 000b"),
            "\(doctor.stdout)"
        )

        // --no-recovery says what it means; --json never carries a new key.
        let none = try TPMHome()
        let unrecoverable = try none.run("store", "init", "--tpm", "--no-recovery")
        #expect(unrecoverable.status == 0 && unrecoverable.stdout.isEmpty, "\(unrecoverable.stderr)")
        #expect(unrecoverable.stderr.contains("no recovery key") && unrecoverable.stderr.contains("must sign in again"))
        #expect(try none.run("doctor").stdout.contains("no recovery recipient"))
        let json = try TPMHome().run("store", "init", "--tpm", "--json")
        #expect(
            json.status == 2 && json.stdout.contains("--recovery-file") && !json.stdout.contains("AGE-SECRET-KEY"),
            "\(json.stdout)"
        )
    }

    /// The same home on another TPM (a copied home folder) is refused, exit 5, and nothing
    /// changes; its own TPM still opens it.
    @Test func anotherTPMIsRefusedAndTheStoreStaysAsItIs() async throws {
        let h = try TPMHome()
        #expect(try h.run("store", "init", "--tpm", "--no-recovery").status == 0)
        try await h.importAlpha()
        #expect(try h.run("store", "lock").status == 0)
        let other = try SoftwareTPM()
        let before = h.snapshot()
        let refused = try h.run("token", "alpha", "--json", tpm: other)
        #expect(refused.status == 5, "\(refused.stdout)")
        #expect(
            refused.stdout.contains("\"tpm_mismatch\"") && refused.stdout.contains("sealed by another TPM"),
            "\(refused.stdout)"
        )
        let doctor = try h.run("doctor", tpm: other)
        #expect(doctor.stdout.contains("sealed by another TPM"), "\(doctor.stdout)")
        #expect(h.snapshot() == before, "a refused TPM changed the store's files")
        let own = try h.run("token", "alpha")
        #expect(own.status == 0 && own.stdout == "AT-alpha-SECRET\n", "\(own.stderr)")
    }

    /// A new TPM (a cleared one, a new motherboard) loses nothing: with the recovery key as the
    /// store's identity, `store seal --tpm` seals it with the new TPM (docs/troubleshooting.md).
    @Test func aNewTPMTakesTheStoreOverWithTheRecoveryKey() async throws {
        let h = try TPMHome()
        #expect(try h.run("store", "init", "--tpm", "--recovery-file", h.outside + "/recovery.txt").status == 0)
        try await h.importAlpha()
        #expect(try h.run("store", "lock").status == 0)
        let replaced = try SoftwareTPM()
        #expect(try h.run("token", "alpha", tpm: replaced).status == 5)
        try FileManager.default.moveItem(atPath: h.data + "/identity.tpm", toPath: h.outside + "/identity.tpm.old")
        try FileManager.default.copyItem(atPath: h.outside + "/recovery.txt", toPath: h.data + "/identity.txt")
        chmod(h.data + "/identity.txt", 0o600)
        let resealed = try h.run(
            "store",
            "seal",
            "--tpm",
            "--recovery-file",
            h.outside + "/new-recovery.txt",
            tpm: replaced
        )
        #expect(resealed.status == 0, "\(resealed.stderr)")
        #expect(try h.run("store", "lock").status == 0)
        let token = try h.run("token", "alpha", tpm: replaced)
        #expect(token.status == 0 && token.stdout == "AT-alpha-SECRET\n", "\(token.stderr)")
        let (status, out, _) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", h.outside + "/new-recovery.txt", h.data + "/store.age"]
        )
        #expect(status == 0 && out.contains("AT-alpha-SECRET"))
        #expect(h.filesHoldingAnIdentity().isEmpty)
    }

    /// A PIN: without one the store is locked (exit 5), a wrong one says how many tries the TPM
    /// has left, the right one opens it; the lockout after too many wrong ones refuses even the
    /// right PIN, while a store without a PIN on the same TPM still opens (its objects are noDA).
    @Test func pinRightWrongAndLockedOut() async throws {
        let h = try TPMHome()
        let pin = try h.secretFile("pin", "2468 in the TPM")
        let wrong = try h.secretFile("wrong", "not the PIN")
        let made = try h.run(
            "store",
            "init",
            "--tpm",
            "--tpm-pin",
            "--no-recovery",
            extra: ["LANYARD_PASSPHRASE_FILE": pin]
        )
        #expect(made.status == 0, "\(made.stderr)")
        try await h.importAlpha(extra: ["LANYARD_PASSPHRASE_FILE": pin])
        #expect(try h.run("store", "lock").status == 0)
        let before = h.snapshot()

        let locked = try h.run("token", "alpha", "--json")
        #expect(
            locked.status == 5 && locked.stdout.contains("\"store_locked\"") && locked.stdout.contains("PIN"),
            "\(locked.stdout)"
        )
        let first = try h.run("token", "alpha", "--json", extra: ["LANYARD_PASSPHRASE_FILE": wrong])
        #expect(
            first.status == 5 && first.stdout.contains("\"tpm_wrong_pin\"") && first.stdout.contains("2 tries left"),
            "\(first.stdout)"
        )
        let right = try h.run("token", "alpha", extra: ["LANYARD_PASSPHRASE_FILE": pin])
        #expect(right.status == 0 && right.stdout == "AT-alpha-SECRET\n", "\(right.stderr)")
        #expect(try h.run("store", "lock").status == 0)

        // swtpm allows 3 failures (TPM2_PT_MAX_AUTH_FAIL); the right PIN above did not reset the count.
        var answers: [String] = []
        for _ in 0..<3 {
            answers.append(try h.run("store", "unlock", "--json", extra: ["LANYARD_PASSPHRASE_FILE": wrong]).stdout)
        }
        #expect(answers.contains { $0.contains("\"tpm_lockout\"") }, "\(answers)")
        let lockedOut = try h.run("token", "alpha", "--json", extra: ["LANYARD_PASSPHRASE_FILE": pin])
        #expect(
            lockedOut.status == 5 && lockedOut.stdout.contains("\"tpm_lockout\"")
                && lockedOut.stdout.contains("every 1000 s"),
            "\(lockedOut.stdout)"
        )
        #expect(h.snapshot() == before, "wrong PINs changed the store's files")

        // Another store on the same TPM, without a PIN, opens during the lockout.
        let neighbour = try TPMHome(sharing: h.tpm)
        #expect(try neighbour.run("store", "init", "--tpm", "--no-recovery").status == 0)
        try await neighbour.importAlpha()
        #expect(try neighbour.run("store", "lock").status == 0)
        let open = try neighbour.run("token", "alpha")
        #expect(
            open.status == 0 && open.stdout == "AT-alpha-SECRET\n",
            "a store without a PIN is shut by the lockout: \(open.stderr)"
        )
    }

    /// `store seal --tpm` converts a passphrase store and a --no-passphrase store: the clear
    /// identity is gone, the slots are there, the TPM opens the store without the passphrase, and
    /// the recovery key opens it with stock age.
    @Test(arguments: [true, false])
    func sealConvertsAStore(withPassphrase: Bool) async throws {
        let h = try TPMHome()
        let passphrase = try h.secretFile("passphrase", "correct horse battery staple")
        let env = withPassphrase ? ["LANYARD_PASSPHRASE_FILE": passphrase] : [:]
        let made = try h.run(["store", "init"] + (withPassphrase ? [] : ["--no-passphrase"]), extra: env)
        #expect(made.status == 0, "\(made.stderr)")
        try await h.importAlpha(extra: env)
        #expect(try h.run("store", "lock").status == 0)
        let clear = h.data + (withPassphrase ? "/identity.age" : "/identity.txt")

        let sealed = try h.run(
            "store",
            "seal",
            "--tpm",
            "--recovery-file",
            h.outside + "/recovery.txt",
            "--json",
            extra: env
        )
        #expect(sealed.status == 0, "\(sealed.stdout) \(sealed.stderr)")
        #expect(sealed.stdout.contains("\"outcome\": \"sealed\""), "\(sealed.stdout)")
        #expect(!FileManager.default.fileExists(atPath: clear), "the clear identity is still there")
        #expect(h.filesHoldingAnIdentity().isEmpty, "\(h.filesHoldingAnIdentity())")

        #expect(try h.run("store", "lock").status == 0)
        let token = try h.run("token", "alpha")  // no passphrase source: the TPM alone
        #expect(token.status == 0 && token.stdout == "AT-alpha-SECRET\n", "\(token.stderr)")
        let (status, out, err) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", h.outside + "/recovery.txt", h.data + "/store.age"]
        )
        #expect(status == 0 && out.contains("AT-alpha-SECRET"), "\(err)")
        let again = try h.run("store", "seal", "--tpm", "--no-recovery")
        #expect(again.status == 1 && again.stderr.contains("already sealed"), "\(again.stderr)")
    }

    /// A `store seal --tpm` killed after identity.tpm landed leaves the clear identity beside it:
    /// the sealed one is used, doctor names the leftover, and running the command again finishes.
    @Test func anInterruptedSealIsFinishedByRunningItAgain() async throws {
        let h = try TPMHome()
        #expect(try h.run("store", "init", "--no-passphrase").status == 0)
        try await h.importAlpha()
        let clear = try Data(contentsOf: URL(fileURLWithPath: h.data + "/identity.txt"))
        #expect(try h.run("store", "seal", "--tpm", "--no-recovery").status == 0)
        // As a kill before the removal leaves it.
        try clear.write(to: URL(fileURLWithPath: h.data + "/identity.txt"))
        chmod(h.data + "/identity.txt", 0o600)
        #expect(try h.run("store", "lock").status == 0)
        #expect(try h.run("token", "alpha").stdout == "AT-alpha-SECRET\n")
        let doctor = try h.run("doctor")
        #expect(doctor.stdout.contains("identity.txt is still beside identity.tpm"), "\(doctor.stdout)")
        let finished = try h.run("store", "seal", "--tpm", "--json")
        #expect(
            finished.status == 0 && finished.stdout.contains("\"outcome\": \"finished\""),
            "\(finished.stdout) \(finished.stderr)"
        )
        #expect(!FileManager.default.fileExists(atPath: h.data + "/identity.txt"))
    }

    /// A TPM device this user may not open (as /dev/tpmrm0 is for users outside group `tss` on
    /// Debian): exit 5, `tpm_permission_denied`, naming the device and the fix; nothing is made.
    /// Run as user nobody when the tests run as root (root opens any file).
    @Test func aTPMDeviceYouMayNotOpenNamesGroupTssAndTheFix() throws {
        var template = Array(
            ((NSTemporaryDirectory() as NSString).standardizingPath + "/lanyard-tpmdev.XXXXXX").utf8CString
        )
        let base = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { try? FileManager.default.removeItem(atPath: base) }
        chmod(base, 0o755)
        let device = base + "/tpmrm0"
        #expect(
            FileManager.default.createFile(atPath: device, contents: Data(), attributes: [.posixPermissions: 0o600])
        )
        let home = base + "/home"
        try FileManager.default.createDirectory(
            atPath: home,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let asRoot = geteuid() == 0
        if asRoot { chown(home, 65534, 65534) } else { chmod(device, 0) }
        let env = [
            "HOME": home, "XDG_CONFIG_HOME": home + "/config", "XDG_DATA_HOME": home + "/data",
            "XDG_STATE_HOME": home + "/state",
            "XDG_RUNTIME_DIR": home + "/run", "PATH": "/usr/bin:/bin", "TPM2TOOLS_TCTI": "device:" + device,
            "DBUS_SESSION_BUS_ADDRESS": "disabled:",
        ]
        let lanyard = builtBinary("lanyard")
        let command =
            (asRoot ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", lanyard] : [lanyard])
            + ["store", "init", "--tpm", "--no-recovery", "--json"]
        let (status, out, err) = try runProcess(command[0], Array(command.dropFirst()), environment: env)
        #expect(status == 5, "\(out) \(err)")
        #expect(
            out.contains("\"tpm_permission_denied\"") && out.contains(device) && out.contains("group tss")
                && out.contains("usermod -aG tss"),
            "\(out)"
        )
        #expect(
            !FileManager.default.fileExists(atPath: home + "/data/lanyard/store.age"),
            "a store was made without the TPM"
        )
    }

    /// The promise of the TPM-sealed store: after `store init --tpm` and refreshes, one of them killed between
    /// the provider's answer and the store write (strace kills the worker on entering its first
    /// link(2), after the recovery file), no file under the home holds an age identity or any
    /// token the server issued in clear. The recovery file is an age file that the recovery key
    /// opens with stock `age`, and the next `token` puts its tokens in place: no reuse.
    @Test func aKilledRefreshLeavesNoKeyOrTokenInClear() async throws {
        let server = try OAuthTestServer(.chatgptEmulator)
        let h = try TPMHome()
        try h.home.writeConfig(
            """
            [store]
            backend = file
            tpm-tcti = \(h.tpm.tcti)
            [provider.openai]
            issuer = \(server.baseURL.absoluteString)
            usage-base-url = \(server.baseURL.absoluteString)
            """
        )
        let initialized = try h.run("store", "init", "--tpm", "--recovery-file", h.outside + "/recovery.txt")
        #expect(initialized.status == 0, "\(initialized.stderr)")
        let paths = Paths(environment: h.home.environment)
        let tpm = TPMLocation(tcti: h.tpm.tcti, source: "[store] tpm-tcti")
        let manager = AccountManager(
            paths: paths,
            config: try ConfigFile.load(path: paths.configFile).config,
            openStore: { _, _ in EncryptedFileStore(paths: paths, tpm: tpm) },
            transport: URLSessionTransport(timeout: 5)
        )
        try await server.signIn(manager, slot: "work", email: "w@example.com")
        #expect(try h.run("refresh", "work").status == 0)
        #expect(try h.run("store", "lock").status == 0)  // the killed worker unseals the key itself

        let killed = try h.home.run(
            ["refresh", "work"],
            launcher: [
                "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=link",
                "-e", "inject=link:signal=KILL:when=1",
            ]
        )
        #expect(killed.status != 0, "the refresh was not killed: \(killed.stderr)")
        #expect(try await server.stat("refreshes_succeeded") == 2)
        let recovery = paths.stateDirectory + "/recovery/work.json"
        let onDisk = try #require(FileManager.default.contents(atPath: recovery), "no recovery file: \(killed.stderr)")
        #expect(onDisk.starts(with: ageHeaderLine))
        var issued = try await server.issuedTokens()
        #expect(issued.refresh.count == 3)
        #expect(
            filesHoldingInClear(
                ["AGE-SECRET-KEY-1"] + issued.refresh + issued.access,
                under: h.home.root,
                except: ["outside"]
            ).isEmpty
        )
        let (status, out, err) = try runProcess("/usr/bin/age", ["-d", "-i", h.outside + "/recovery.txt", recovery])
        #expect(status == 0, "the recovery key does not open the recovery file: \(err)")
        let recovered = try Credential.decode(Data(out.utf8), source: "recovery file")

        let token = try h.run("token", "work")
        #expect(token.status == 0 && token.stdout == recovered.tokens.accessToken + "\n", "\(token.stderr)")
        #expect(!FileManager.default.fileExists(atPath: recovery))
        #expect(try h.run("refresh", "work").status == 0)
        issued = try await server.issuedTokens()
        #expect(
            filesHoldingInClear(
                ["AGE-SECRET-KEY-1"] + issued.refresh + issued.access,
                under: h.home.root,
                except: ["outside"]
            ).isEmpty
        )
        #expect(try await server.stat("refresh_reused") == 0)
        #expect(try await server.stat("refreshes_succeeded") == 3)
    }

    /// tpm2-tools, as an independent reader: the storage key `tpm2_createprimary` makes from the
    /// documented template has the name identity.tpm records, and `tpm2_load` and `tpm2_unseal`
    /// under it give back the store's identity.
    @Test func tpm2ToolsUnsealTheIdentity() throws {
        let h = try TPMHome()
        #expect(try h.run("store", "init", "--tpm", "--no-recovery").status == 0)
        let text = try String(contentsOfFile: h.data + "/identity.tpm", encoding: .utf8)
        func field(_ key: String) -> String {
            text.split(separator: "\n").first { $0.hasPrefix(key + " ") }.map { String($0.dropFirst(key.count + 1)) }
                ?? ""
        }
        let dir = h.outside
        try Data(hex: field("public")).write(to: URL(fileURLWithPath: dir + "/seal.pub"))
        try Data(hex: field("private")).write(to: URL(fileURLWithPath: dir + "/seal.priv"))
        let env = ["TPM2TOOLS_TCTI": h.tpm.tcti, "PATH": "/usr/bin:/bin"]
        func tool(_ command: String) throws -> (Int32, String, String) {
            try runProcess("/bin/sh", ["-c", "cd '\(dir)' && " + command], environment: env)
        }
        let attributes = "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda"
        var run = try tool(
            "tpm2_createprimary -Q -C o -G ecc -a '\(attributes)' -c srk.ctx "
                + "&& tpm2_readpublic -c srk.ctx | sed -n 's/^name: //p'"
        )
        #expect(
            run.0 == 0 && run.1.trimmingCharacters(in: .whitespacesAndNewlines) == field("storage-key"),
            "tpm2-tools' storage key: \(run.1) \(run.2); identity.tpm: \(field("storage-key"))"
        )
        // swtpm has no resource manager: transient objects stay loaded between tools unless flushed.
        run = try tool(
            "tpm2_flushcontext -t && tpm2_load -Q -C srk.ctx -u seal.pub "
                + "-r seal.priv -c seal.ctx && tpm2_flushcontext -t "
                + "&& tpm2_unseal -c seal.ctx -o unsealed.txt && age-keygen -y unsealed.txt"
        )
        #expect(run.0 == 0, "tpm2_load / tpm2_unseal: \(run.2)")
        #expect(
            run.1.trimmingCharacters(in: .whitespacesAndNewlines) == field("recipient"),
            "the unsealed identity is not the store's"
        )
    }
}

/// A home whose file store uses its own software TPM (or one shared with another home).
final class TPMHome: @unchecked Sendable {
    let home = TestHome()
    let tpm: SoftwareTPM
    /// A folder outside the home, for recovery keys and bundles.
    let outside: String

    init(sharing: SoftwareTPM? = nil) throws {
        tpm = try sharing ?? SoftwareTPM()
        home.withoutSessionBus = true
        try home.writeConfig("[store]\nbackend = file\n")
        outside = home.root + "/outside"
        try FileManager.default.createDirectory(
            atPath: outside,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
    }

    var data: String { home.root + "/data/lanyard" }

    @discardableResult
    func run(_ args: String..., tpm other: SoftwareTPM? = nil, extra: [String: String] = [:]) throws -> TestHome.Output
    {
        try run(args, tpm: other, extra: extra)
    }

    func run(_ args: [String], tpm other: SoftwareTPM? = nil, extra: [String: String] = [:]) throws -> TestHome.Output {
        try home.run(args, extraEnvironment: ["TPM2TOOLS_TCTI": (other ?? tpm).tcti].merging(extra) { $1 })
    }

    /// A 0600 file holding `secret` and a line break, outside the home.
    func secretFile(_ name: String, _ secret: String) throws -> String {
        let path = outside + "/" + name
        try (secret + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// Imports slot `alpha` (access token `AT-alpha-SECRET`) from a bundle exported elsewhere.
    func importAlpha(extra: [String: String] = [:]) async throws {
        let source = CLIHarness()
        try source.addSlot("alpha", active: true)
        let (identity, recipient) = try BundleTests().keygen(source.root)
        let bundle = source.root + "/slots.age"
        #expect(await source.run("export", "--to", bundle, "--recipient", recipient, "--force").status == 0)
        let imported = try run(["import", bundle, "--identity", identity, "--yes"], extra: extra)
        #expect(imported.status == 0, "import: \(imported.stderr)")
        try? FileManager.default.removeItem(atPath: identity)
    }

    /// The data folder's files (but the lock files) and their bytes.
    func snapshot() -> [String: Data] {
        var files: [String: Data] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: data)) ?? [] where !name.hasSuffix(".lock") {
            files[name] = FileManager.default.contents(atPath: data + "/" + name)
        }
        return files
    }

    /// Files under the home (but the folder outside it) holding an age identity in clear.
    func filesHoldingAnIdentity() -> [String] {
        let marker = Data("AGE-SECRET-KEY-1".utf8)
        var found: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: home.root)
        while let relative = enumerator?.nextObject() as? String {
            guard !relative.hasPrefix("outside") else { continue }
            if let bytes = FileManager.default.contents(atPath: home.root + "/" + relative),
                bytes.range(of: marker) != nil
            {
                found.append(relative)
            }
        }
        return found
    }
}

extension Data {
    /// Bytes from lowercase hex (test input the test itself checked).
    init(hex: String) {
        var bytes = [UInt8]()
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            func value(_ c: UInt8) -> UInt8 { c >= 0x61 ? c - 0x61 + 10 : c - 0x30 }
            bytes.append(value(high) << 4 | value(low))
        }
        self.init(bytes)
    }
}
