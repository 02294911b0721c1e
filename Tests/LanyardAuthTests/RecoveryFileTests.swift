import Foundation
import Glibc
import LanyardCore
import LanyardNetwork
import LanyardStore
import LanyardSupport
import LanyardTestSupport
import Testing

@testable import LanyardAuth

/// The recovery file a refresh writes before the store: an age file encrypted
/// to the file store's recipients, never a refresh token in clear at rest, with the same crash
/// ordering as before; a clear JSON file an older Lanyard left is still taken.
@Suite struct RecoveryFileTests {
    static let slot = try! Slot("work")

    static func credential(_ refresh: String = "RT-recovery-SECRET") -> Credential {
        Credential(
            provider: "openai",
            tokens: TokenSet(
                accessToken: "AT-recovery-SECRET",
                refreshToken: refresh,
                idToken: nil,
                expiresAt: Date(timeIntervalSince1970: 1_900_000_000)
            ),
            lastRefresh: Date(timeIntervalSince1970: 1_800_000_000),
            account: AccountInfo()
        )
    }

    static func recoveryPath(_ paths: Paths) -> String { paths.stateDirectory + "/recovery/work.json" }

    /// On disk the file starts with the age header and holds no token in clear; stock `age` opens
    /// it with the store's identity; Lanyard reads it back through the store.
    @Test func theFileOnDiskIsAnAgeFileWithNoTokenInClear() throws {
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        let store = EncryptedFileStore(paths: paths)
        try store.initialize(passphrase: nil)
        let file = RecoveryFile(paths: paths, slot: Self.slot, store: store)
        #expect(try file.write(Self.credential()) == .file)

        let onDisk = try #require(FileManager.default.contents(atPath: Self.recoveryPath(paths)))
        #expect(onDisk.starts(with: ageHeaderLine), "\(String(decoding: onDisk.prefix(40), as: UTF8.self))")
        #expect(onDisk.range(of: Data("SECRET".utf8)) == nil, "a token in clear in the recovery file")
        #expect(permissionBits(Self.recoveryPath(paths)) == 0o600)
        let (status, out, err) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", paths.dataDirectory + "/identity.txt", Self.recoveryPath(paths)]
        )
        #expect(status == 0 && out.contains("RT-recovery-SECRET"), "stock age: \(err)")

        #expect(try file.read().tokens.refreshToken == "RT-recovery-SECRET")
        // Without the store (a listing) it is seen as waiting, but not opened.
        #expect(RecoveryFile(paths: paths, slot: Self.slot).exists)
        #expect(RecoveryFiles.pending(paths: paths) == [Self.slot])
        #expect(throws: StoreError.self) { try RecoveryFile(paths: paths, slot: Self.slot).read() }
        file.remove()
        #expect(!FileManager.default.fileExists(atPath: Self.recoveryPath(paths)))
    }

    /// A write killed as it renamed its temporary into place leaves only `SLOT.json.XXXXXX`, an
    /// age file too: a listing sees it waiting, and a reader with the store checks it decrypts
    /// whole and adopts it (a truncated one is not adopted).
    @Test func anEncryptedTemporaryLeftByAKilledRenameIsAdopted() throws {
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        let store = EncryptedFileStore(paths: paths)
        try store.initialize(passphrase: nil)
        let file = RecoveryFile(paths: paths, slot: Self.slot, store: store)
        #expect(try file.write(Self.credential()) == .file)
        let path = Self.recoveryPath(paths)
        let whole = try #require(FileManager.default.contents(atPath: path))
        #expect(rename(path, path + ".Ab12Cd") == 0)
        #expect(
            FileManager.default.createFile(
                atPath: path + ".Zz99Zz",
                contents: whole.prefix(whole.count - 5),
                attributes: [.posixPermissions: 0o600]
            )
        )

        #expect(RecoveryFiles.pending(paths: paths) == [Self.slot])
        #expect(RecoveryFile(paths: paths, slot: Self.slot).exists)
        #expect(!FileManager.default.fileExists(atPath: path), "adopted without the store to check it")
        #expect(try file.read().tokens.refreshToken == "RT-recovery-SECRET")
        #expect(FileManager.default.contents(atPath: path) == whole)
        file.remove()
        #expect(file.temps().isEmpty && !file.waiting)
    }

    /// A passphrase store: the file is encrypted to the key the process opened the store with
    /// (its public key sits inside identity.age), and opens once the store is unlocked. A process
    /// that never opened it, with the store locked, cannot encrypt: the kernel keyring takes the
    /// tokens, and nothing is written to disk.
    @Test func aPassphraseStoreEncryptsToTheKeyItOpenedWith() throws {
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        let setup = EncryptedFileStore(paths: paths)
        try setup.initialize(passphrase: "correct horse", workFactor: 10)
        defer { setup.lock() }
        let slot = Self.slot
        try setup.put(Self.credential("RT-old-SECRET"), for: slot)

        // Opened by this process (as every refresh reads the store first), then locked.
        let store = EncryptedFileStore(paths: paths)
        _ = try store.get(slot)
        setup.lock()
        defer { RefreshEscrow.remove(slot: slot, paths: paths) }
        let file = RecoveryFile(paths: paths, slot: slot, store: store)
        #expect(try file.write(Self.credential()) == .file)
        let onDisk = try #require(FileManager.default.contents(atPath: Self.recoveryPath(paths)))
        #expect(onDisk.starts(with: ageHeaderLine) && onDisk.range(of: Data("SECRET".utf8)) == nil)
        #expect(throws: StoreError.self) { try file.read() }  // locked: reading needs the key
        try store.unlock(passphrase: "correct horse")
        #expect(try file.read().tokens.refreshToken == "RT-recovery-SECRET")
        file.remove()

        // Never opened here, and locked: no recipient to encrypt to.
        setup.lock()
        let fresh = EncryptedFileStore(paths: paths)
        let unopened = RecoveryFile(paths: paths, slot: slot, store: fresh)
        if EncryptedFileStore.cacheUnavailableReason == nil {
            guard case .kernelKeyring = try unopened.write(Self.credential()) else {
                Issue.record("the tokens did not go to the kernel keyring")
                return
            }
            #expect(!FileManager.default.fileExists(atPath: Self.recoveryPath(paths)))
            #expect(unopened.waiting)
            #expect(try unopened.read().tokens.refreshToken == "RT-recovery-SECRET")
            unopened.remove()
        } else {
            #expect(throws: (any Error).self) { try unopened.write(Self.credential()) }
            #expect(!FileManager.default.fileExists(atPath: Self.recoveryPath(paths)))
        }
        #expect(
            filesHoldingInClear(["AGE-SECRET-KEY-1", "RT-recovery-SECRET", "RT-old-SECRET"], under: home.root).isEmpty
        )
    }

    /// A store with no recipient (the keyring; here its stand-in) keeps refreshed tokens in the
    /// kernel keyring, never in a file.
    @Test func aStoreWithoutRecipientUsesTheKernelKeyring() throws {
        try #require(EncryptedFileStore.cacheUnavailableReason == nil, "needs the kernel keyring")
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        let store = MemoryStore(kind: .secretService)
        let file = RecoveryFile(paths: paths, slot: Self.slot, store: store)
        defer { file.remove() }
        guard case .kernelKeyring(let reason) = try file.write(Self.credential()) else {
            Issue.record("a file was written for the keyring")
            return
        }
        #expect(reason.contains("no key to encrypt it to"), "\(reason)")
        #expect(!FileManager.default.fileExists(atPath: Self.recoveryPath(paths)))
        #expect(RecoveryFiles.pending(paths: paths, slots: [Self.slot]) == [Self.slot])
        #expect(try file.settle(into: store, slot: Self.slot))
        #expect(try store.get(Self.slot).tokens.refreshToken == "RT-recovery-SECRET")
        #expect(RefreshEscrow.get(slot: Self.slot, paths: paths) == nil)
    }

    /// For a slot in the keyring the kernel keyring's copy is what a killed refresh leaves: the
    /// next read of the credential puts it in place before handing anything out (else the stored,
    /// spent refresh token would reach `exec`'s auth.json while the access token is still valid).
    @Test func aKeyringSlotsWaitingTokensAreSettledBeforeTheCredentialIsUsed() async throws {
        try #require(EncryptedFileStore.cacheUnavailableReason == nil, "needs the kernel keyring")
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        let store = MemoryStore(kind: .secretService)
        let spent = Self.credential("RT-spent-SECRET")
        try store.putInTest(spent, for: Self.slot)
        try Registry(paths: paths).updateInTest { doc in
            doc.slots[Self.slot] = SlotRecord(
                provider: "openai",
                backend: .secretService,
                state: .signedIn(expiresAt: spent.tokens.expiresAt),
                lastRefresh: spent.lastRefresh
            )
        }
        let file = RecoveryFile(paths: paths, slot: Self.slot, store: store)
        defer { file.remove() }
        var refreshed = Self.credential()
        refreshed.lastRefresh = Date(timeIntervalSince1970: 1_800_000_100)
        guard case .kernelKeyring = try file.write(refreshed) else {
            Issue.record("a file was written for the keyring")
            return
        }
        let manager = AccountManager(
            paths: paths,
            config: LanyardConfig(),
            openStore: { _, _ in store },
            transport: URLSessionTransport()
        )
        #expect(
            try manager.credentialIfFreshInTest(slot: Self.slot) == nil,
            "the stored credential was handed out with tokens waiting"
        )
        let fresh = try await manager.freshCredential(slot: Self.slot)
        #expect(fresh.tokens.refreshToken == "RT-recovery-SECRET")
        #expect(try store.getInTest(Self.slot).tokens.refreshToken == "RT-recovery-SECRET")
        #expect(RefreshEscrow.get(slot: Self.slot, paths: paths) == nil)
        #expect(try manager.credentialIfFreshInTest(slot: Self.slot)?.tokens.refreshToken == "RT-recovery-SECRET")
    }

    /// The refresh worker killed between the provider's answer and the store write (strace kills
    /// it on entering its first link(2): the store keeps its previous generation by a link, after
    /// the recovery file's rename). (a) The recovery file on disk is an age file and no file under
    /// the home holds a token the server issued in clear; (b) the next `lanyard token` puts the
    /// tokens in place, and the server never sees a refresh token twice.
    @Test func aWorkerKilledBeforeTheStoreWriteLeavesOnlyAnAgeFile() async throws {
        let env = try await EmulatorHome()
        env.home.withoutSessionBus = true  // its doctor must see only this home (file store)
        let before = try await env.signIn("work", email: "w@example.com")
        let killed = try env.home.run(
            ["refresh", "work"],
            launcher: [
                "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=link",
                "-e", "inject=link:signal=KILL:when=1",
            ]
        )
        #expect(killed.status != 0, "the refresh was not killed: \(killed.stderr)")
        #expect(
            try await env.server.stat("refreshes_succeeded") == 1,
            "the server did not rotate the token before the kill"
        )
        #expect(try env.stored("work").tokens.refreshToken == before.tokens.refreshToken, "the store was written")

        let path = Self.recoveryPath(env.paths)
        let onDisk = try #require(FileManager.default.contents(atPath: path), "no recovery file: \(killed.stderr)")
        #expect(onDisk.starts(with: ageHeaderLine))
        let issued = try await env.server.issuedTokens()
        #expect(issued.refresh.count == 2)
        #expect(filesHoldingInClear(issued.refresh + issued.access, under: env.home.root).isEmpty)
        let (status, out, err) = try runProcess(
            "/usr/bin/age",
            ["-d", "-i", env.paths.dataDirectory + "/identity.txt", path]
        )
        #expect(status == 0, "stock age: \(err)")
        let recovered = try Credential.decode(Data(out.utf8), source: "recovery file")
        #expect(recovered.tokens.refreshToken != before.tokens.refreshToken)
        #expect(issued.refresh.contains(recovered.tokens.refreshToken ?? "-"))

        let token = try env.home.run("token", "work")
        #expect(token.status == 0 && token.stdout == recovered.tokens.accessToken + "\n", "\(token.stderr)")
        #expect(try env.stored("work").tokens.refreshToken == recovered.tokens.refreshToken)
        #expect(!FileManager.default.fileExists(atPath: path))
        let again = try env.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await env.server.stat("refresh_reused") == 0)
        #expect(try await env.server.stat("refreshes_succeeded") == 2)
        let doctor = try env.home.run("doctor")
        #expect(doctor.status == 0, "\(doctor.stdout) \(doctor.stderr)")
    }

    /// A recovery file is encrypted for the store it was written for, so `store migrate` puts its
    /// tokens into that store before the slot moves: the keyring gets the live refresh token, not
    /// the spent one, and the next refresh is no reuse.
    @Test func migrateMovesTheTokensAKilledRefreshLeft() async throws {
        try requireTestKeyring()
        let env = try await EmulatorHome()
        let before = try await env.signIn("work", email: "w@example.com")
        let killed = try env.home.run(
            ["refresh", "work"],
            launcher: [
                "/usr/bin/strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=link",
                "-e", "inject=link:signal=KILL:when=1",
            ]
        )
        #expect(killed.status != 0)
        let path = Self.recoveryPath(env.paths)
        #expect(
            FileManager.default.contents(atPath: path)?.starts(with: ageHeaderLine) == true,
            "no age recovery file: \(killed.stderr)"
        )

        let migrated = try env.home.run("store", "migrate", "--to", "secret-service", "work")
        #expect(migrated.status == 0, "\(migrated.stdout) \(migrated.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
        let moved = try SecretServiceStore(timeout: 5).getInTest(Self.slot)
        #expect(moved.tokens.refreshToken != before.tokens.refreshToken, "the spent refresh token moved")
        let again = try env.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await env.server.stat("refresh_reused") == 0)
        _ = try env.home.run("remove", "work", "--yes")
    }

    /// A clear JSON recovery file an older Lanyard left (an upgrade in between) is still picked
    /// up: `doctor` names it, and the next `token` puts its tokens in place.
    @Test func anOldClearRecoveryFileIsStillPickedUp() async throws {
        let env = try await EmulatorHome()
        env.home.withoutSessionBus = true
        let before = try await env.signIn("work", email: "w@example.com")
        let manager = try env.manager()
        let (record, store) = try manager.storeOf(Self.slot)
        let refreshed = try await BlockingExecutor.shared.run {
            try manager.exchangeRefreshToken(slot: Self.slot, current: before, record: record, store: store)
        }
        let path = Self.recoveryPath(env.paths)
        try FileManager.default.createDirectory(
            atPath: env.paths.stateDirectory + "/recovery",
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        #expect(
            FileManager.default.createFile(
                atPath: path,
                contents: refreshed.jsonData(),
                attributes: [.posixPermissions: 0o600]
            )
        )

        let doctor = try env.home.run("doctor", "--json")
        #expect(doctor.stdout.contains("refreshed tokens wait in recovery files for: work"), "\(doctor.stdout)")
        let token = try env.home.run("token", "work")
        #expect(token.status == 0 && token.stdout == refreshed.tokens.accessToken + "\n", "\(token.stderr)")
        #expect(try env.stored("work").tokens.refreshToken == refreshed.tokens.refreshToken)
        #expect(!FileManager.default.fileExists(atPath: path))
        let again = try env.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try await env.server.stat("refresh_reused") == 0)
    }
}
