import Foundation
import LanyardTestSupport
import Testing
import LanyardCore
import LanyardStore

/// Error advice that leads somewhere.
@Suite struct StoreAdviceTests {
    /// A slot kept in the keyring, with no keyring to reach: `backend = file` alone changes nothing
    /// for it, so the advice names `lanyard store migrate` too.
    @Test func aKeyringSlotWithoutAKeyringPointsAtStoreMigrate() throws {
        let home = TestHome()
        let paths = Paths(environment: home.environment)
        try Registry(paths: paths).update { doc in
            doc.slots[try Slot("work")] = SlotRecord(provider: "openai", backend: .secretService, account: AccountInfo(email: "w@example.com"),
                                                     state: .signedIn(expiresAt: Date() + 3600), createdAt: Date())
            doc.active = try Slot("work")
        }
        let runtime = home.root + "/run"
        #expect(!FileManager.default.fileExists(atPath: runtime + "/bus"))
        let r = try home.run(["token", "work"], extraEnvironment: ["DBUS_SESSION_BUS_ADDRESS": "", "PATH": "/usr/bin:/bin"])
        #expect(r.status == 5, "\(r.stderr)")
        #expect(r.stderr.contains("`lanyard store migrate --to file`"), "\(r.stderr)")
        #expect(r.stderr.contains("`lanyard store init`"))
    }
}
