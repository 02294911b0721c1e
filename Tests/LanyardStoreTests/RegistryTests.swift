import Foundation
import LanyardCore
import LanyardStore
import LanyardSupport
import Testing

@Suite struct RegistryTests {
    let temp = TempDirectory()

    func record(_ email: String) -> SlotRecord {
        SlotRecord(
            provider: "openai",
            backend: .secretService,
            account: AccountInfo(email: email, accountID: "acct-\(email)", plan: Plan(rawValue: "pro")),
            state: .signedIn(expiresAt: Date(timeIntervalSince1970: 1_800_000_000)),
            lastRefresh: Date(timeIntervalSince1970: 1_799_000_000),
            lastErrorCode: nil
        )
    }

    @Test func startsEmptyWithoutAFile() throws {
        #expect(try Registry(paths: temp.paths).load() == RegistryDocument())
    }

    @Test func roundTripsSlotsAndTheActiveSlot() throws {
        let registry = Registry(paths: temp.paths)
        let work = try Slot("work")
        let home = try Slot("home")
        try registry.update { doc in
            doc.slots[work] = record("w@example.com")
            doc.slots[home] = record("h@example.com")
            doc.active = work
        }
        let loaded = try registry.load()
        #expect(loaded.active == work)
        #expect(loaded.slots[home] == record("h@example.com"))
        #expect(loaded.sortedSlots.map(\.slot.name) == ["home", "work"])
    }

    @Test func writesPrivateFilesAndFolders() throws {
        let registry = Registry(paths: temp.paths)
        try registry.update { $0.slots[try Slot("a")] = record("a@x") }
        #expect(fileMode(temp.paths.dataDirectory) == 0o700)
        #expect(fileMode(registry.path) == 0o600)
        try registry.update { $0.slots[try Slot("b")] = record("b@x") }
        #expect(fileMode(registry.path + ".prev") == 0o600)
        // The previous generation is kept beside it.
        let previous = try RegistryDocument.decode(
            Data(contentsOf: URL(fileURLWithPath: registry.path + ".prev")),
            source: "prev"
        )
        #expect(previous.slots.count == 1)
    }

    @Test func aThrowingUpdateWritesNothing() throws {
        let registry = Registry(paths: temp.paths)
        try registry.update { $0.slots[try Slot("a")] = record("a@x") }
        let before = try Data(contentsOf: URL(fileURLWithPath: registry.path))
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try registry.update { doc in
                doc.slots = [:]
                throw Boom()
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: registry.path)) == before)
    }

    @Test func aCorruptFileIsMovedAsideAndReported() throws {
        let registry = Registry(paths: temp.paths)
        try SecureFiles.ensureDirectory(temp.paths.dataDirectory)
        let garbage = Data(#"{"version":1,"slots":{"work":{"provider":"openai""#.utf8)
        _ = FileManager.default.createFile(
            atPath: registry.path,
            contents: garbage,
            attributes: [.posixPermissions: 0o600]
        )
        do {
            _ = try registry.load()
            Issue.record("a corrupt registry must not load")
        } catch let error as RegistryError {
            guard case .corrupt(let path, let movedTo, let detail) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(path == registry.path)
            #expect(movedTo.hasPrefix(registry.path + ".corrupt-"))
            #expect(detail == "not valid JSON (line 1, column 50: unexpected end of document inside an object)")
            #expect(FileManager.default.contents(atPath: movedTo) == garbage, "the bad file is kept byte for byte")
            #expect(!FileManager.default.fileExists(atPath: registry.path))
            #expect(error.localizedDescription.contains(movedTo))
        }
    }

    @Test func aWellFormedButInvalidDocumentIsCorruptToo() throws {
        let registry = Registry(paths: temp.paths)
        try SecureFiles.ensureDirectory(temp.paths.dataDirectory)
        let bad = Data(#"{"version":1,"active":"ghost","slots":{}}"#.utf8)
        _ = FileManager.default.createFile(atPath: registry.path, contents: bad, attributes: [.posixPermissions: 0o600])
        let error = #expect(throws: RegistryError.self) { try registry.load() }
        guard case .corrupt(_, _, let detail)? = error else {
            Issue.record("wrong error")
            return
        }
        #expect(detail == ".active names a slot that is not in .slots")
    }

    @Test func aNewerVersionIsReportedButNotMoved() throws {
        let registry = Registry(paths: temp.paths)
        try SecureFiles.ensureDirectory(temp.paths.dataDirectory)
        _ = FileManager.default.createFile(atPath: registry.path, contents: Data(#"{"version":2,"slots":{}}"#.utf8))
        #expect(throws: StoreError.self) { try registry.load() }
        #expect(FileManager.default.fileExists(atPath: registry.path))
    }

    @Test func refusesASymlinkedRegistryOrFolder() throws {
        let registry = Registry(paths: temp.paths)
        try SecureFiles.ensureDirectory(temp.paths.dataDirectory)
        _ = FileManager.default.createFile(atPath: temp.path + "/elsewhere.json", contents: Data())
        try FileManager.default.createSymbolicLink(
            atPath: registry.path,
            withDestinationPath: temp.path + "/elsewhere.json"
        )
        #expect(throws: StoreError.unsafePath(path: registry.path, reason: "it is a symbolic link")) {
            try registry.load()
        }

        let other = TempDirectory()
        try FileManager.default.createDirectory(atPath: other.path + "/data", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: other.path + "/real", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: other.path + "/data/lanyard",
            withDestinationPath: other.path + "/real"
        )
        #expect(throws: StoreError.unsafePath(path: other.paths.dataDirectory, reason: "it is a symbolic link")) {
            try Registry(paths: other.paths).load()
        }
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to create a file owned by another user"))
    func refusesAForeignOwnedRegistry() throws {
        let registry = Registry(paths: temp.paths)
        try SecureFiles.ensureDirectory(temp.paths.dataDirectory)
        _ = FileManager.default.createFile(atPath: registry.path, contents: Data(#"{"version":1,"slots":{}}"#.utf8))
        chown(registry.path, 65534, 65534)
        let error = #expect(throws: StoreError.self) { try registry.load() }
        guard case .unsafePath(_, let reason)? = error else {
            Issue.record("wrong error")
            return
        }
        #expect(reason.contains("owned by uid 65534"))
    }

    @Test func tightensALooseDataFolder() throws {
        try FileManager.default.createDirectory(
            atPath: temp.paths.dataDirectory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755]
        )
        _ = try Registry(paths: temp.paths).load()
        #expect(fileMode(temp.paths.dataDirectory) == 0o700)
    }
}
