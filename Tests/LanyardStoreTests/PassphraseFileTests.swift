import Foundation
import Testing
@testable import LanyardStore

/// A passphrase from LANYARD_PASSPHRASE_FILE or LANYARD_ASKPASS is the first line without its
/// ending, `\n` or `\r\n` (in a Swift `String` the two are one `Character`, which once kept the
/// `\r\n`); spaces are part of it.
@Suite struct PassphraseFileTests {
    @Test(arguments: [("  pass phrase \n", "  pass phrase "), ("  pass phrase \r\n", "  pass phrase "), ("pass", "pass"),
                      ("pass\r\nsecond\r\n", "pass"), ("\tpass\t\n\n", "\tpass\t"), ("pa\rss\n", "pa\rss")])
    func theFirstLineWithoutItsEnding(_ file: String, _ passphrase: String) throws {
        let temp = TempDirectory()
        let path = temp.path + "/passphrase"
        try file.write(toFile: path, atomically: true, encoding: .utf8)
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
}
