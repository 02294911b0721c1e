import Foundation

#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Testing
#endif

/// True under scripts/with-keepassxc.sh: KeePassXC is the Secret Service.
package let testKeyringIsKeePassXC = ProcessInfo.processInfo.environment["LANYARD_TEST_KEYRING_PROVIDER"] == "keepassxc"
/// True under scripts/with-kwallet.sh: KWallet (kwalletd5) is the Secret Service.
package let testKeyringIsKWallet = ProcessInfo.processInfo.environment["LANYARD_TEST_KEYRING_PROVIDER"] == "kwallet"
/// The provider name `doctor` and `health()` should report for the test keyring.
package let testKeyringProviderName =
    testKeyringIsKeePassXC ? "KeePassXC" : testKeyringIsKWallet ? "KWallet" : "gnome-keyring"

#if DEBUG
/// Skips the test under plain `swift test`, and fails it under make test and make check
/// (``TestServices``), unless it runs inside scripts/with-keyring.sh: no test can write into a
/// user's real keyring.
package func requireTestKeyring(sourceLocation: SourceLocation = #_sourceLocation) throws {
    guard ProcessInfo.processInfo.environment["LANYARD_TEST_KEYRING"] == "1" else {
        // Never the user's own keyring: skipped under plain `swift test`, failed under make test.
        if !TestServices.required {
            try TestServices.missing(
                "needs the private test keyring (scripts/with-keyring.sh)",
                failure: CancellationError()
            )
        }
        try #require(
            Bool(false),
            "run under scripts/with-keyring.sh (make test): this test needs the private test keyring",
            sourceLocation: sourceLocation
        )
        return
    }
}
#endif
