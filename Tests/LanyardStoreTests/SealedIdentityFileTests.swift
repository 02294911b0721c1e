import Age
import Foundation
import LanyardStore
import Testing

/// `identity.tpm`'s strict decoder: what Lanyard writes reads back unchanged, and anything else is
/// refused naming the line and what is wrong with it (docs/store-format.md, "TPM-sealed identity").
@Suite struct SealedIdentityFileTests {
    /// A file as `store init --tpm` writes it (the blobs shaped like a sealed object's, not real).
    static func sample(pin: Bool = false, recovery: Int = 1) -> SealedIdentityFile {
        let attributes: [UInt8] = pin ? [0x00, 0x00, 0x00, 0x52] : [0x00, 0x00, 0x04, 0x52]
        let publicArea: [UInt8] =
            [0x00, 0x08, 0x00, 0x0B] + attributes + [0x00, 0x00, 0x00, 0x10, 0x00, 0x20]
            + [UInt8](repeating: 0xAB, count: 32)
        let publicBlob = [UInt8(publicArea.count >> 8), UInt8(publicArea.count & 0xFF)] + publicArea
        let privateBlob: [UInt8] = [0x00, 0x10] + [UInt8](repeating: 0x42, count: 16)
        return SealedIdentityFile(
            recipient: X25519Identity.generate().recipient.string,
            storageKeyName: [0x00, 0x0B] + [UInt8](repeating: 0x11, count: 32),
            pin: pin,
            recoveryRecipients: (0..<recovery).map { _ in X25519Identity.generate().recipient.string },
            publicBlob: publicBlob,
            privateBlob: privateBlob
        )
    }

    @Test(arguments: [(false, 0), (false, 1), (true, 3)])
    func whatLanyardWritesReadsBack(pin: Bool, recovery: Int) throws {
        let file = Self.sample(pin: pin, recovery: recovery)
        #expect(try SealedIdentityFile.decode(file.encoded()) == file)
        #expect(file.storageKeyNameHex.hasPrefix("000b") && file.storageKeyNameHex.count == 68)
    }

    /// Each damage is refused, naming its line (comments count) and the problem.
    @Test func damageIsRefusedNamingTheLine() throws {
        let good = String(decoding: Self.sample().encoded(), as: UTF8.self)
        var lines = good.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()  // the empty string after the last line break
        func decoding(_ change: (inout [String]) -> Void) -> SealedIdentityFileError? {
            var copy = lines
            change(&copy)
            do {
                _ = try SealedIdentityFile.decode(Data((copy.joined(separator: "\n") + "\n").utf8))
                return nil
            } catch { return error }
        }
        let cases: [(String, (inout [String]) -> Void, Int?, String)] = [
            ("version", { $0[1] = "lanyard-tpm-identity v2" }, 2, "expected \"lanyard-tpm-identity v1\""),
            ("recipient", { $0[2] = "recipient age1notakey" }, 3, "not an age X25519 recipient"),
            ("storage key", { $0[3] = "storage-key 0004" + String(repeating: "11", count: 32) }, 4, "SHA-256 TPM name"),
            (
                "uppercase hex",
                { $0[3] = $0[3].uppercased().replacingOccurrences(of: "STORAGE-KEY", with: "storage-key") }, 4,
                "not lowercase hex"
            ),
            ("pin", { $0[4] = "pin maybe" }, 5, "expected yes or no"),
            ("pin and noDA disagree", { $0[4] = "pin yes" }, 7, "noDA"),
            ("public size", { $0[6] = "public 0030" + $0[6].dropFirst("public 002e".count) }, 7, "size field"),
            ("private size", { $0[7] = "private 0011" + $0[7].dropFirst("private 0010".count) }, 8, "size field"),
            ("missing private", { $0.removeLast() }, 8, "expected \"private …\""),
            ("trailing line", { $0.append("extra") }, 9, "unexpected line"),
            ("a space too many", { $0[5] += " " }, 6, "one value"),
            ("recovery twice", { $0.insert($0[5], at: 5) }, 7, "named twice"),
        ]
        for (name, change, line, problem) in cases {
            let error = decoding(change)
            #expect(
                error?.line == line && error?.problem.contains(problem) == true,
                "\(name): \(String(describing: error))"
            )
        }
        #expect(throws: SealedIdentityFileError.self) { try SealedIdentityFile.decode(Data(good.dropLast().utf8)) }
        #expect(throws: SealedIdentityFileError.self) { try SealedIdentityFile.decode(Data()) }
        #expect(throws: SealedIdentityFileError.self) {
            try SealedIdentityFile.decode(Data(good.replacingOccurrences(of: "\n", with: "\r\n").utf8))
        }
    }
}
