import Foundation
import LanyardCore
import LanyardStore
import Testing

/// A passphrase from LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS is the first line without its
/// ending, `\n` or `\r\n` (in a Swift `String` the two are one `Character`, which once kept the
/// `\r\n`); spaces are part of it.
@Suite struct PassphraseFileTests {
    @Test(arguments: [
        ("  pass phrase \n", "  pass phrase "), ("  pass phrase \r\n", "  pass phrase "), ("pass", "pass"),
        ("pass\r\nsecond\r\n", "pass"), ("\tpass\t\n\n", "\tpass\t"), ("pa\rss\n", "pa\rss"),
    ])
    func theFirstLineWithoutItsEnding(_ file: String, _ passphrase: String) throws {
        let temp = TempDirectory()
        let path = temp.path + "/passphrase"
        try file.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect(try PassphraseReader(environment: ["LANYARD_PASSPHRASE_FILE": path]).read(prompt: "") == passphrase)
        #expect(try PassphraseReader.firstLine(Data(file.utf8), source: "test") == passphrase)
    }

    @Test(arguments: ["", "\n", "\r\n", "\r\nlater\n"])
    func anEmptyFirstLineIsAnError(_ file: String) {
        #expect {
            try PassphraseReader.firstLine(Data(file.utf8), source: "password file /p", what: "password")
        } throws: { error in
            (error as? PassphraseError)?.message == "password file /p gave an empty password"
        }
    }

    /// A passphrase file others can read is refused before it is read, as ssh refuses such a key:
    /// the error says the mode and the `chmod 600` that fixes it, and never the content.
    @Test(arguments: [0o644, 0o640, 0o604, 0o620, 0o602] as [mode_t])
    func aFileOthersCanGetAtIsRefused(_ mode: mode_t) throws {
        let temp = TempDirectory()
        let path = temp.path + "/passphrase"
        try "hunter2\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, mode)
        let reader = PassphraseReader(environment: ["LANYARD_PASSPHRASE_FILE": path])
        #expect(
            throws: StoreError.unsafePath(
                path: path,
                reason: "it holds a secret and its mode is 0\(String(mode, radix: 8)), so group "
                    + "or others can get at it; run `chmod 600 \(path)`"
            )
        ) {
            try reader.read(prompt: "")
        }
        chmod(path, 0o600)
        #expect(try reader.read(prompt: "") == "hunter2")
        for mode in [0o400, 0o700] as [mode_t] {
            chmod(path, mode)
            #expect(try reader.read(prompt: "") == "hunter2", "only its owner can get at it: fine")
        }
    }

    /// A symbolic link of yours to a private file of yours is followed (systemd credentials and
    /// secrets folders hand files over that way); the file's own mode is what counts.
    @Test func aLinkToAPrivateFileIsFollowed() throws {
        let temp = TempDirectory()
        let target = temp.path + "/secret"
        let link = temp.path + "/link"
        try "pw\n".write(toFile: target, atomically: true, encoding: .utf8)
        chmod(target, 0o600)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(try SecureFiles.readSecretFile(link) == Data("pw\n".utf8))
        chmod(target, 0o644)
        #expect(throws: StoreError.self) { try SecureFiles.readSecretFile(link) }
        #expect(try SecureFiles.readSecretFile(temp.path + "/none") == nil)
    }

    /// A pipe of this process (`LANYARD_PASSPHRASE_FILE=<(pass show lanyard)` hands one over as
    /// /dev/fd/N) is read like a file: it is the user's and mode 0600.
    @Test func aPipeIsReadLikeAFile() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        _ = "from a pipe\n".withCString { write(ends[1], $0, strlen($0)) }
        close(ends[1])
        #expect(
            try PassphraseReader(environment: ["LANYARD_PASSPHRASE_FILE": "/dev/fd/\(ends[0])"]).read(prompt: "")
                == "from a pipe"
        )
    }

    /// A wrong passphrase from the file names the file (not what it holds), whether a command
    /// opens the locked store with it or `store unlock` does.
    @Test func aWrongPassphraseFromAFileNamesTheFile() throws {
        let temp = TempDirectory()
        let path = temp.path + "/passphrase"
        try "wrong horse\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        let plain = EncryptedFileStore(paths: temp.paths, unlockCacheSeconds: 60)
        _ = try plain.initialize(passphrase: "correct horse", workFactor: 10)
        plain.lock()
        let environment = ["LANYARD_PASSPHRASE_FILE": path]
        let opened = CredentialStores.open(
            .file,
            config: LanyardConfig(),
            paths: temp.paths,
            interactive: false,
            passphraseEnvironment: environment
        )
        let expected = StoreError.wrongPassphraseFrom(source: "LANYARD_PASSPHRASE_FILE \(path)")
        #expect(throws: expected) { try opened.list() }
        let reader = PassphraseReader(environment: environment)
        #expect(throws: expected) {
            try reader.namingSource { try plain.unlock(passphrase: try reader.read(prompt: "")) }
        }
        #expect(
            expected.errorDescription?.contains(path) == true
                && expected.errorDescription?.contains("wrong horse") == false
        )
        // From the terminal there is nothing to name.
        #expect(throws: StoreError.wrongPassphrase) {
            try PassphraseReader(environment: [:]).namingSource { try plain.unlock(passphrase: "x") }
        }
    }
}
