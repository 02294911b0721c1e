// libFuzzer harness for the ASCII armor decoder. Built by scripts/fuzz.sh against the Age
// module. Beyond "does not crash" it checks that the decoder is strict: anything it accepts must
// be the canonical encoding of what it decoded, up to the tolerated CRLF line ends and
// surrounding whitespace.

import Age
import Foundation

private func isSpace(_ c: UInt8) -> Bool { c == 0x20 || (0x09...0x0D).contains(c) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzArmor(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = Data(UnsafeRawBufferPointer(start: data, count: size))
    let decoded: Data
    do throws(AgeError) {
        decoded = try Armor.decode(input)
    } catch {
        _ = error.description
        return 0
    }
    // Normalise what the decoder tolerates: CRLF -> LF, whitespace around the block.
    var normal: [UInt8] = []
    let bytes = [UInt8](input)
    var i = 0
    while i < bytes.count {
        if bytes[i] == 0x0D, i + 1 < bytes.count, bytes[i + 1] == 0x0A {
            i += 1
            continue
        }
        normal.append(bytes[i])
        i += 1
    }
    let start = normal.firstIndex { !isSpace($0) } ?? normal.count
    let end = (normal.lastIndex { !isSpace($0) } ?? -1) + 1
    let expected = Array(normal[start..<max(start, end)]) + [0x0A]
    guard [UInt8](Armor.encode(decoded)) == expected else {
        fatalError("armor decoder accepted a non-canonical encoding")
    }
    return 0
}
