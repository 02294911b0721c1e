import Foundation
import LanyardCore
import LanyardStore
import LanyardTestSupport
import Testing

/// The keyring locked under Lanyard (a screen locker, the user, KWallet's idle timeout), through
/// the CLI as a user meets it: on a gnome-keyring of the test's own, on a bus of its own, so
/// locking it touches no other test.
@Suite struct LockedKeyringCommandTests {
    /// A locked keyring: `token` and `login` exit 5 (`store_locked`) with the fix named, print no
    /// token and change nothing; once the keyring is unlocked the slot answers as before.
    @Test func aLockedKeyringIsExitFiveAndLosesNothing() async throws {
        let env = try await IntegrationHome()
        let bus = try PrivateSessionBus(folder: env.home.root + "/bus")
        let password = "keyring password"
        var environment = env.home.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        var daemon: KeyringDaemon? = try KeyringDaemon(environment: environment, password: password)
        try env.home.writeConfig(
            """
            [store]
            backend = secret-service
            [provider.openai]
            issuer = \(env.server.baseURL.absoluteString)
            usage-base-url = \(env.server.baseURL.absoluteString)
            """
        )
        func run(_ args: [String], stdin: String = "") throws -> (status: Int32, stdout: String, stderr: String) {
            let (status, out, err) = try runProcess(
                lanyardBinary(),
                args,
                environment: environment,
                stdin: Data(stdin.utf8)
            )
            return (status, out, err)
        }
        let token = try await env.personalAccessToken(email: "ci@example.com")
        let login = try run(["login", "ci", "--with-access-token"], stdin: token + "\n")
        #expect(login.status == 0, "\(login.stderr)")
        let before = try run(["token", "ci"])
        let answeredBefore = before.stdout == token + "\n"  // compared apart: a failed #expect prints its operands
        #expect(before.status == 0 && answeredBefore)
        let recordBefore = try #require(try Registry(paths: env.paths).loadInTest().slots[try Slot("ci")])

        // Lock: gnome-keyring locks a collection at once when asked over the Secret Service.
        let (lockStatus, _, lockErrors) = try runProcess(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets", "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock", "['/org/freedesktop/secrets/collection/login']",
            ],
            environment: environment
        )
        #expect(lockStatus == 0, "\(lockErrors)")

        let locked = try run(["token", "ci"])
        #expect(locked.status == 5, "\(locked.stderr)")
        #expect(locked.stdout.isEmpty && locked.stderr.lowercased().contains("locked"), "\(locked.stderr)")
        let lockedJSON = try run(["token", "ci", "--json"])
        #expect(lockedJSON.status == 5 && lockedJSON.stdout.contains("\"store_locked\""), "\(lockedJSON.stdout)")
        let second = try await env.personalAccessToken(email: "ci2@example.com")
        let refused = try run(["login", "ci2", "--with-access-token"], stdin: second + "\n")
        #expect(refused.status == 5, "\(refused.stderr)")
        for output in [locked, lockedJSON, refused] {
            let leaked =
                output.stdout.contains(token) || output.stderr.contains(token) || output.stderr.contains(second)
            #expect(!leaked)
        }
        let document = try Registry(paths: env.paths).loadInTest()
        #expect(document.slots[try Slot("ci2")] == nil, "nothing stored for a sign-in the keyring refused")
        #expect(document.slots[try Slot("ci")]?.state == recordBefore.state)

        // A new daemon unlocks the same keyring file with the password: the slot is as it was.
        daemon?.kill()
        daemon = try KeyringDaemon(environment: environment, password: password)
        let after = try run(["token", "ci"])
        let answeredAfter = after.stdout == token + "\n"
        #expect(after.status == 0 && answeredAfter, "\(after.stderr)")
        withExtendedLifetime(daemon) {}
    }
}
