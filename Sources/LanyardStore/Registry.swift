import FoundationEssentials
import Glibc
import LanyardCore
import LanyardSupport
import LanyardSystem

/// The list of slots on disk (`$XDG_DATA_HOME/lanyard/registry.json`).
///
/// Reads need no lock (writes replace the file atomically, so a reader sees the old or the new
/// document). Changes go through ``update(_:)`` (or ``transaction(_:)``, when a file-store write
/// must land with them), which holds an exclusive `flock` across read-modify-write so concurrent
/// processes never lose each other's changes, after settling what a killed transaction left (as
/// readers do when the lock is free). A file that does not
/// parse is moved aside and reported, never treated as empty.
package struct Registry: Sendable {
    package let path: String
    private let directory: String
    /// The folders this registry belongs to (its slots' locks live there too).
    package let paths: Paths

    package init(paths: Paths) {
        self.paths = paths
        directory = paths.dataDirectory
        path = paths.registryFile
    }

    /// The current document; an empty one when no registry exists yet.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func load() throws -> RegistryDocument {
        try SecureFiles.ensureDirectory(directory)
        settleForReaders(staged: true)
        return try read()
    }

    /// The registry read once, for commands that need the active slot or one slot's record: in
    /// the layout Lanyard writes, each is found without decoding the other slots, so `token`,
    /// `which` and `status` cost the same with ten slots or ten thousand. Anything unexpected
    /// falls back to the full, strict ``load()``.
    package func view() throws -> RegistryView {
        try SecureFiles.ensureDirectory(directory)
        settleForReaders(staged: false)
        // Mapped: the registry is only ever replaced by rename, and a lookup touches few pages.
        OperationCounts.registryRead()
        return RegistryView(data: try SecureFiles.read(path, mapped: true), registry: self)
    }

    /// Runs `body` on the current document under the registry lock and writes the result
    /// durably when `body` returns (nothing is written when it throws).
    @discardableResult
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func update<T>(_ body: (inout RegistryDocument) throws -> T) throws -> T {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: path + ".lock")
        defer { withExtendedLifetime(lock) {} }
        try settle()
        var document = try read()
        let original = document
        let result = try body(&document)
        if document != original {
            try SecureFiles.atomicWrite(document.jsonData(pretty: true), to: path, keepPrevious: true)
        }
        return result
    }

    /// Makes `slot` the active slot, under the registry lock. In the layout Lanyard writes only
    /// the active slot's name changes in the file's bytes (the other slots are neither decoded nor
    /// re-encoded), so switching costs the same with ten slots or ten thousand, bar the write;
    /// anything else goes through ``update(_:)``.
    /// - Returns: the slot active before, and the new active slot's record.
    /// - Throws: `RegistryError.unknownSlot` when there is no such slot.
    @available(*, noasync, message: "blocking: run it on BlockingExecutor.shared")
    package func setActive(_ slot: Slot) throws -> (previous: Slot?, record: SlotRecord) {
        try SecureFiles.ensureDirectory(directory)
        let lock = try FileLock(path: path + ".lock")
        defer { withExtendedLifetime(lock) {} }
        try settle()
        OperationCounts.registryRead()
        if let data = try SecureFiles.read(path, mapped: true) {
            let view = RegistryView(data: data, registry: self)
            if let (previous, _) = view.fastActive(data), let record = view.fastRecord(of: slot, in: data) {
                if previous == slot { return (previous, record) }
                let start = RegistryView.activePrefix.count
                let old = Array("\"\(previous.name)\"".utf8)
                if data.count > start + old.count, data[start..<(start + old.count)].elementsEqual(old) {
                    var spliced = Data(capacity: data.count + slot.name.utf8.count)
                    spliced.append(data[..<start])
                    spliced.append(contentsOf: Array("\"\(slot.name)\"".utf8))
                    spliced.append(data[(start + old.count)...])
                    try SecureFiles.atomicWrite(spliced, to: path, keepPrevious: true)
                    return (previous, record)
                }
            }
        }
        // Any other layout: the full read-modify-write, still under the lock held here.
        var document = try read()
        guard let record = document.slots[slot] else { throw RegistryError.unknownSlot(slot) }
        let previous = document.active
        if previous != slot {
            document.active = slot
            try SecureFiles.atomicWrite(document.jsonData(pretty: true), to: path, keepPrevious: true)
        }
        return (previous, record)
    }

    /// The generation before the last write (`registry.json.prev`), when it is there and parses:
    /// what a repair recovers the active slot and slot details from after the registry was lost.
    package func previousGeneration() -> RegistryDocument? {
        guard let data = try? SecureFiles.read(path + ".prev") else { return nil }
        return try? RegistryDocument.decodeStreaming(data, source: path + ".prev")
    }

    /// The active slot the registry last named, when the registry was lost: from the newest
    /// quarantined copy (`registry.json.corrupt-*`, whose first line usually survives whatever
    /// broke the rest), else from the previous generation.
    package func lastKnownActive() -> Slot? {
        let folder = PathText.parent(of: path)
        let base = PathText.lastComponent(of: path) + ".corrupt-"
        var newest: (path: String, modified: Int)?
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix(base) {
            var st = stat()
            guard lstat(folder + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            if newest.map({ st.st_mtim.tv_sec > $0.modified }) ?? true {
                newest = (folder + "/" + name, st.st_mtim.tv_sec)
            }
        }
        if let newest, let data = try? SecureFiles.read(newest.path, mapped: true),
            let slot = RegistryView.leadingActive(data)
        {
            return slot
        }
        return previousGeneration()?.active
    }

    func read() throws -> RegistryDocument {
        // Mapped, not copied: the file is only ever replaced by rename.
        OperationCounts.registryRead()
        guard let data = try SecureFiles.read(path, mapped: true) else { return RegistryDocument() }
        return try decode(data)
    }

    /// Decodes a whole registry file; a corrupt one is moved aside and reported.
    fileprivate func decode(_ data: Data) throws -> RegistryDocument {
        do {
            return try RegistryDocument.decodeStreaming(data, source: path)
        } catch {
            if error.detail.hasPrefix(".version"), error.detail.hasSuffix(")") {
                // A newer Lanyard's registry is not corrupt: leave it alone.
                throw StoreError.corrupt(source: path, detail: error.detail)
            }
            let stamp = RFC3339.string(from: Date()).replacing(":", with: "")
            let moved = SecureFiles.moveAside(path, suffix: "corrupt-\(stamp)")
            throw RegistryError.corrupt(path: path, movedTo: moved, detail: error.detail)
        }
    }
}

/// One read of the registry file, answering the questions most commands ask without decoding
/// every slot. The fast paths rely on the layout ``RegistryDocument/jsonData(pretty:)`` writes
/// (sorted keys, two-space indentation: `"active"` first, each slot a key at depth two, `"version"`
/// last) and check it; a file in any other layout (edited by hand, or damaged) is decoded whole,
/// with the full checks and error reporting of ``Registry/load()``.
package struct RegistryView {
    let data: Data?
    let registry: Registry

    /// The whole document (decoded now).
    package func document() throws -> RegistryDocument {
        guard let data else { return RegistryDocument() }
        return try registry.decode(data)
    }

    /// The active slot.
    package func active() throws -> Slot? {
        if let data, let (slot, _) = fastActive(data) { return slot }
        return try document().active
    }

    /// A slot's record, or nil when the registry has no such slot.
    package func record(of slot: Slot) throws -> SlotRecord? {
        if let data, let record = fastRecord(of: slot, in: data) { return record }
        return try document().slots[slot]
    }

    /// The active slot and its record, when the file starts `{\n  "active": "NAME",` and NAME's
    /// record is found (the full decode would reject an active slot without one).
    /// How a registry in Lanyard's layout starts when it has an active slot.
    static let activePrefix = Array(#"{"#.utf8) + [0x0a] + Array(#"  "active": "#.utf8)

    func fastActive(_ data: Data) -> (Slot, SlotRecord)? {
        guard hasVersionSuffix(data), let slot = Self.leadingActive(data), let record = fastRecord(of: slot, in: data)
        else { return nil }
        return (slot, record)
    }

    /// The active slot named on the first line of a registry in Lanyard's layout (the rest of the
    /// file unread: it may be a damaged copy).
    static func leadingActive(_ data: Data) -> Slot? {
        guard data.starts(with: activePrefix),
            case .string(let name)? = try? JSONValue.parseValue(in: data, at: activePrefix.count)
        else { return nil }
        return try? Slot(name)
    }

    /// A slot's record found by its key at depth two (`\n    "NAME": {`), decoded alone.
    func fastRecord(of slot: Slot, in data: Data) -> SlotRecord? {
        guard hasVersionSuffix(data) else { return nil }
        let needle = [0x0a] + Array(#"    ""#.utf8) + Array(slot.name.utf8) + Array(#"": {"#.utf8)
        let found: Int? = data.withUnsafeBytes { raw in
            needle.withUnsafeBytes { key in Self.firstLine(startingWith: key, in: raw) }
        }
        guard let found, let value = try? JSONValue.parseValue(in: data, at: found + needle.count - 1),
            let fields = try? JSONFields(value, path: ".slots." + slot.name)
        else { return nil }
        return try? SlotRecord(json: fields)
    }

    /// The offset of the first `needle` that starts with a newline (memchr from line to line).
    private static func firstLine(startingWith needle: UnsafeRawBufferPointer, in bytes: UnsafeRawBufferPointer) -> Int?
    {
        guard let base = bytes.baseAddress, let key = needle.baseAddress, needle.count > 1 else { return nil }
        var offset = 0
        while offset + needle.count <= bytes.count {
            guard let hit = memchr(base + offset, 0x0a, bytes.count - offset - needle.count + 1) else { return nil }
            let at = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + at, key, needle.count) == 0 { return at }
            offset = at + 1
        }
        return nil
    }

    /// Whether the file ends with the version Lanyard writes last (`"version": 1` and `}`).
    private func hasVersionSuffix(_ data: Data) -> Bool {
        let suffix = Array(#"  "version": \#(RegistryDocument.currentVersion)"#.utf8) + [0x0a, 0x7d]
        let trimmed = data.last == 0x0a ? data.dropLast() : data[...]
        return trimmed.count > suffix.count && trimmed.suffix(suffix.count).elementsEqual(suffix)
            && trimmed.dropLast(suffix.count).last == 0x0a
    }
}

extension Registry {
    /// Wakes on every change of the registry (inotify on its folder, created first if need be),
    /// for the agent and `status --watch`.
    package func watch() -> FolderWatch {
        try? SecureFiles.ensureDirectory(directory)
        return FolderWatch(directory: directory)
    }
}
