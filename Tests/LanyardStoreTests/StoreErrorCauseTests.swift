import Foundation
import Glibc
import LanyardCore
import LanyardGLib
import LanyardSupport
import LanyardSystem
import LanyardTestSupport
import Testing

@testable import LanyardStore

/// A store error that reports another error keeps it (``LanyardError/underlying``): the system
/// call and its errno behind an I/O error, GLib's error behind a durable write or a keyring call.
@Suite struct StoreErrorCauseTests {
    /// A lock file in a folder that does not exist: the chain ends at open(2)'s ENOENT.
    @Test func aFailedSystemCallIsTheRootOfAnIOError() throws {
        let dir = TempDirectory()
        let path = dir.path + "/missing/slot.lock"
        let error = try #require(throws: StoreError.self) { _ = try FileLock(path: path) }
        #expect(error.code == .ioError)
        let root = try #require(error.underlying as? SystemCallError, "\(error)")
        #expect(root.call == "open" && root.target == path && root.errno == ENOENT)
        #expect(error.userFacingDescription.contains(root.reason), "the text still says why")
    }

    /// A durable write (GLib's g_file_set_contents_full) into a folder that does not exist: the
    /// cause is GLib's GFileError.
    @Test func glibsErrorIsTheRootOfAFailedDurableWrite() throws {
        let dir = TempDirectory()
        let error = try #require(throws: StoreError.self) {
            try SecureFiles.atomicWrite(Data("x".utf8), to: dir.path + "/missing/registry.json")
        }
        let root = try #require(error.underlying as? GLibError, "\(error)")
        #expect(root.domain == .other("g-file-error-quark"), "\(root)")
        #expect(error.userFacingDescription.contains(root.message))
    }

    /// A session bus address where no bus listens: the Secret Service store is unavailable, and
    /// the cause is GIO's error from connecting (in a process of its own, whose bus this is).
    @Test func gioErrorIsTheRootOfANoBusStoreError() async throws {
        try await inProcessOfItsOwn("StoreErrorCauseTests/gioErrorIsTheRootOfANoBusStoreError") {
            let dir = TempDirectory()
            setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=\(dir.path)/no-bus", 1)
            let store = SecretServiceStore(timeout: 5)
            let error = try #require(throws: StoreError.self) { _ = try store.getInTest(try Slot("work")) }
            #expect(error.code == .storeUnavailable, "\(error)")
            let root = try #require(error.underlying as? GLibError, "\(error)")
            #expect(root.domain == .io, "\(root)")
        }
    }

    /// The Secret Service backend's mapping of a failed libsecret or GIO call keeps the GError
    /// (here a real one, from GLib) as the cause of the StoreError it reports.
    @Test func aKeyringCallsGErrorIsKeptByTheStoreError() throws {
        let dir = TempDirectory()
        let glib: GLibError
        do {
            try DurableFile.replace(dir.path + "/missing/file", with: Data())
            Issue.record("the write succeeded")
            return
        } catch {
            glib = try #require(error.glibError)
        }
        let store = SecretServiceStore(timeout: 5)
        let mapped = store.storeError(
            KeyringFailure.glib(glib),
            operation: "storing work",
            deadline: try Deadline(seconds: 5)
        )
        #expect(mapped.code == .ioError)
        let root = try #require(mapped.underlying as? GLibError, "\(mapped)")
        #expect(root.domain == glib.domain && root.code == glib.code && root.message == glib.message)
    }
}
