import Foundation
import LanyardStore
import LanyardTestSupport
import Testing

/// `.lanyard` pins that someone else could have planted, or that would hang or flood a reader,
/// are passed over with a warning; resolution goes on to the next pin up. A name with control
/// characters is an error whose message shows them escaped. (The pinned slots do not exist, so
/// `which` prints the resolution and exits 3.)
@Suite struct HostilePinTests {
    /// A home with a trustworthy pin at its root (naming `outer`) and `sub` below it.
    func home() throws -> (TestHome, String) {
        let home = TestHome()
        try "outer\n".write(toFile: home.root + "/.lanyard", atomically: true, encoding: .utf8)
        let sub = home.root + "/sub"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        return (home, sub)
    }

    func which(_ home: TestHome, in directory: String) throws -> (Int32, String, String) {
        try runProcess(
            builtBinary("lanyard"),
            ["which"],
            environment: home.environment.merging(["PWD": directory]) { $1 },
            workingDirectory: directory
        )
    }

    @Test(arguments: ["symlink to /dev/zero", "fifo", "another owner", "1 GB", "world-writable folder"])
    func aPinThatCannotBeTrustedIsPassedOverWithAWarning(_ kind: String) throws {
        let (home, sub) = try home()
        let pin = sub + "/.lanyard"
        switch kind {
        case "symlink to /dev/zero":
            try FileManager.default.createSymbolicLink(atPath: pin, withDestinationPath: "/dev/zero")
        case "fifo": #expect(mkfifo(pin, 0o644) == 0)
        case "another owner":
            try "inner\n".write(toFile: pin, atomically: true, encoding: .utf8)
            #expect(chown(pin, 4242, 4242) == 0, "the tests run as root in make check")
        case "1 GB":
            #expect(FileManager.default.createFile(atPath: pin, contents: nil))
            #expect(truncate(pin, 1 << 30) == 0)
        default:
            try "inner\n".write(toFile: pin, atomically: true, encoding: .utf8)
            #expect(chmod(sub, 0o777) == 0)
        }
        let (status, out, err) = try which(home, in: sub)
        #expect(status == 3, "\(err)")
        #expect(out.hasPrefix("outer  (pinned by \(home.root)/.lanyard)"))
        #expect(err.hasPrefix("lanyard: warning: ignoring \(pin): it "), "\(err)")
        withExtendedLifetime(home) {}
    }

    @Test func aTrustedPinInAStickyFolderIsFollowed() throws {
        let (home, sub) = try home()
        try "inner\n".write(toFile: sub + "/.lanyard", atomically: true, encoding: .utf8)
        #expect(chmod(sub, 0o1777) == 0)
        let (status, out, err) = try which(home, in: sub)
        #expect(status == 3 && !err.contains("warning"), "\(err)")
        #expect(out.hasPrefix("inner  (pinned by \(sub)/.lanyard)"))
    }

    @Test func controlCharactersInAPinAreShownEscaped() throws {
        let (home, sub) = try home()
        try "bad\u{1B}]0;owned\u{7}\n".write(toFile: sub + "/.lanyard", atomically: true, encoding: .utf8)
        let (status, _, err) = try which(home, in: sub)
        #expect(status == 2)
        #expect(!err.contains("\u{1B}") && !err.contains("\u{7}"))
        #expect(err.contains("bad\\u{1B}]0;owned\\u{7}"))
    }

    @Test func onlyTheFirstKilobytesAreRead() throws {
        let dir = TestHome()
        let pin = dir.root + "/.lanyard"
        try ("# " + String(repeating: "x", count: 10_000) + "\nlate\n").write(
            toFile: pin,
            atomically: true,
            encoding: .utf8
        )
        #expect(PinFile.find(from: dir.root).pin?.name == "")  // the name lies past the 4 KiB read
        #expect(PinFile.find(from: dir.root).ignored.isEmpty)
    }
}
