import Foundation
import LanyardCLI
import LanyardTestSupport
import Testing

/// Containers whose seccomp profile blocks keyctl (Docker's default) and kernels without keys
/// support cannot cache an unlocked file store. These tests take the kernel keyring away from a
/// real `lanyard` process with strace's fault injection (every add_key, keyctl and request_key
/// fails with ENOSYS) and check that a passphrase-protected store still works through
/// LANYARD_PASSPHRASE_FILE, and says what to do without it.
@Suite struct NoKernelKeyringTests {
    @Test func passphraseStoreWorksWithoutKernelKeyringThroughThePassphraseFile() async throws {
        // A bundle with one slot, exported from an in-process harness to a stock age key.
        let source = CLIHarness()
        try source.addSlot("alpha", active: true)
        let keys = BundleTests()
        let (identity, recipient) = try keys.keygen(source.root)
        let bundle = source.root + "/slots.age"
        #expect(await source.run("export", "--to", bundle, "--recipient", recipient).status == 0)

        let home = TestHome()
        try home.writeConfig("[store]\nbackend = file\n")
        let passphrase = home.root + "/passphrase"
        try "correct horse battery staple\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        chmod(passphrase, 0o600)
        let withPassphrase = ["LANYARD_PASSPHRASE_FILE": passphrase]

        let initialized = try runWithoutKernelKeyring(home, ["store", "init"], extra: withPassphrase)
        #expect(initialized.status == 0, "\(initialized.stderr)")
        #expect(initialized.stderr.contains("the kernel keyring is unavailable here"))
        for file in ["store.age", "identity.age"] {
            #expect(
                FileManager.default.fileExists(atPath: home.root + "/data/lanyard/" + file),
                "\(file) was not written"
            )
        }

        let imported = try runWithoutKernelKeyring(
            home,
            ["import", bundle, "--identity", identity],
            extra: withPassphrase
        )
        #expect(imported.status == 0, "\(imported.stderr)")
        let token = try runWithoutKernelKeyring(home, ["token", "alpha"], extra: withPassphrase)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout == "AT-alpha-SECRET\n")

        // Without a passphrase source the store is locked, and the message says why and what to do.
        let locked = try runWithoutKernelKeyring(home, ["token", "alpha"], extra: [:])
        #expect(locked.status == 5)
        #expect(
            locked.stderr.contains("kernel keyring is unavailable")
                && locked.stderr.contains("LANYARD_PASSPHRASE_FILE"),
            "\(locked.stderr)"
        )
        #expect(!locked.stderr.contains("SECRET") && locked.stdout.isEmpty)
    }

    /// Runs `lanyard ARGS` in `home` under strace, with every kernel-keyring call failing.
    private func runWithoutKernelKeyring(
        _ home: TestHome,
        _ args: [String],
        extra: [String: String]
    ) throws -> TestHome.Output {
        try home.run(
            args,
            extraEnvironment: extra,
            launcher: [
                "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=add_key,keyctl,request_key",
                "-e", "inject=add_key,keyctl,request_key:error=ENOSYS",
            ]
        )
    }
}
