import Foundation
import LanyardStore
import Testing

/// Temporaries that a write killed between creating and renaming them leaves in the data folder.
@Suite struct LeftoverTemporariesTests {
    func make(_ dir: TempDirectory, _ names: [String]) throws {
        try FileManager.default.createDirectory(atPath: dir.paths.dataDirectory, withIntermediateDirectories: true)
        for name in names { try Data("x".utf8).write(to: URL(fileURLWithPath: dir.paths.dataDirectory + "/" + name)) }
    }

    func names(_ paths: [String]) -> [String] { paths.map { ($0 as NSString).lastPathComponent } }

    @Test func findsOnlyGLibTemporariesAndPreviousGenerationLinksOfGuardedFiles() throws {
        let dir = TempDirectory()
        try make(
            dir,
            [
                "registry.json", "registry.json.lock", "registry.json.prev", "registry.json.Ab3xY9",
                "registry.json.prev.tmp",
                "store.age", "store.age.q1W2e3", "identity.txt.ZZZZZZ", "identity.age.000000",
                "registry.json.corrupt-20261201T101010Z", "registry.json.ab_cd!", "notes.txt.AAAAAA",
                "store.age.1234567",
            ]
        )
        #expect(
            names(LeftoverTemporaries.find(dir.paths)) == [
                "identity.age.000000", "identity.txt.ZZZZZZ", "registry.json.Ab3xY9", "registry.json.prev.tmp",
                "store.age.q1W2e3",
            ]
        )
        #expect(
            names(LeftoverTemporaries.remove(dir.paths)) == [
                "identity.age.000000", "identity.txt.ZZZZZZ", "registry.json.Ab3xY9", "registry.json.prev.tmp",
                "store.age.q1W2e3",
            ]
        )
        #expect(LeftoverTemporaries.find(dir.paths).isEmpty)
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.paths.dataDirectory).sorted()
        #expect(
            left == [
                "notes.txt.AAAAAA", "registry.json", "registry.json.ab_cd!", "registry.json.corrupt-20261201T101010Z",
                "registry.json.lock", "registry.json.prev", "store.age", "store.age.1234567", "store.age.lock",
            ]
        )
    }

    /// A write holds its file's lock from before its temporary exists until after the rename: a
    /// temporary whose lock is held is a write in progress, neither reported nor removed.
    @Test func aTemporaryWhoseLockIsHeldIsAWriteInProgress() throws {
        let dir = TempDirectory()
        try make(dir, ["registry.json.Ab3xY9", "store.age.q1W2e3"])
        do {
            let writer = try FileLock(path: dir.paths.registryFile + ".lock")
            #expect(names(LeftoverTemporaries.find(dir.paths)) == ["store.age.q1W2e3"])
            #expect(names(LeftoverTemporaries.remove(dir.paths)) == ["store.age.q1W2e3"])
            #expect(FileManager.default.fileExists(atPath: dir.paths.registryFile + ".Ab3xY9"))
            withExtendedLifetime(writer) {}
        }
        // The writer died (its lock went with it): now it is a leftover.
        #expect(names(LeftoverTemporaries.find(dir.paths)) == ["registry.json.Ab3xY9"])
    }

    /// A temporary made the way GLib makes it (mkstemp on FILE.XXXXXX) next to a real registry.
    @Test func aTemporaryMadeLikeGLibsIsFoundAndTheRegistryKept() throws {
        let dir = TempDirectory()
        let registry = Registry(paths: dir.paths)
        try registry.update { $0.active = nil }
        // What g_file_set_contents_full leaves when killed after mkstemp: FILE.XXXXXX.
        var template = Array((dir.paths.registryFile + ".XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        #expect(fd >= 0)
        close(fd)
        #expect(LeftoverTemporaries.find(dir.paths).count == 1)
        #expect(LeftoverTemporaries.remove(dir.paths).count == 1)
        #expect(try registry.load().slots.isEmpty)
    }
}
