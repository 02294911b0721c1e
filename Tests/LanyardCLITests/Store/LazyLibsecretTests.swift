import Foundation
import LanyardTestSupport
import Testing

@testable import LanyardCLI

/// The binaries link only GLib; libsecret, GIO and GObject are loaded on first use (they cost
/// about 1.2 ms at every start). These tests watch the dynamic loader (LD_DEBUG=files) of real
/// `lanyard` processes.
@Suite struct LazyLibsecretTests {
    static let lazy = ["libsecret-1.so", "libgio-2.0.so", "libgobject-2.0.so"]

    @Test func commandsThatNeverTouchTheKeyringDoNotLoadLibsecret() throws {
        let home = TestHome()
        for args in [["version"], ["list"], ["which"], ["completion", "bash"]] {
            let (_, loaded) = try loadedLibraries(home, args[0], contentsOf: Array(args.dropFirst()))
            #expect(loaded.contains { $0.hasPrefix("libglib-2.0.so") }, "\(args): GLib is linked: \(loaded.sorted())")
            for library in Self.lazy + ["libqrencode.so", "libtss2-"] {
                #expect(!loaded.contains { $0.hasPrefix(library) }, "\(args) loaded \(library)")
            }
        }
    }

    /// libqrencode is loaded only when a QR code is drawn (`login --qr`).
    @Test func qrCodesLoadLibqrencodeOnFirstUse() throws {
        #expect(QRCode.render("https://example.com/device")?.contains("▀") == true)
    }

    @Test func theKeyringBackendLoadsItOnFirstUse() throws {
        try requireTestKeyring()
        let home = TestHome()
        let (output, loaded) = try loadedLibraries(home, "doctor", contentsOf: ["--json"])
        #expect(output.stdout.contains("\"reachable\": true"), "\(output.stdout)")
        for library in Self.lazy {
            #expect(loaded.contains { $0.hasPrefix(library) }, "doctor did not load \(library): \(loaded.sorted())")
        }
    }
}

extension LazyLibsecretTests {
    /// lanyard-secret.h declares the part of libsecret Lanyard calls (so the build needs only
    /// GLib's headers); compiled here against libsecret's own headers, every prototype must match
    /// and every constant must have libsecret's value.
    @Test func declaredLibsecretAPIMatchesLibsecretsHeaders() throws {
        let header = repositoryRoot.path + "/Sources/CLibsecret/lanyard-secret.h"
        let text = try String(contentsOfFile: header, encoding: .utf8)
        let regex = try NSRegularExpression(pattern: #"^\s*(SECRET_[A-Z_]+) = ([^,\n]+),"#, options: .anchorsMatchLines)
        let constants = regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
            (String(text[Range(match.range(at: 1), in: text)!]), String(text[Range(match.range(at: 2), in: text)!]))
        }
        #expect(constants.count >= 15, "found \(constants.count) constants")
        // secret-paths.h (the `_for_dbus_path…` calls) is declared only with SECRET_API_SUBJECT_TO_CHANGE.
        var check =
            "#define SECRET_API_SUBJECT_TO_CHANGE\n#include <libsecret/secret.h>\n#define "
            + "LANYARD_SECRET_PROTOTYPES_ONLY\n#include \"\(header)\"\n"
        for (name, value) in constants {
            check += "_Static_assert(\(name) == (\(value)), \"\(name) differs from libsecret\");\n"
        }
        let dir = NSTemporaryDirectory() + "lanyard-secret-check-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try check.write(toFile: dir + "/check.c", atomically: true, encoding: .utf8)
        let (status, _, diagnostics) = try runProcess(
            "/bin/sh",
            [
                "-c", "clang -fsyntax-only -Werror $(pkg-config --cflags libsecret-1) \"$0\"",
                dir + "/check.c",
            ]
        )
        #expect(status == 0, "lanyard-secret.h does not match libsecret: \(diagnostics)")
    }

    /// The libraries the dynamic loader opened for `lanyard COMMAND REST`.
    func loadedLibraries(
        _ home: TestHome,
        _ command: String,
        contentsOf rest: [String]
    ) throws -> (TestHome.Output, Set<String>) {
        let output = try home.run([command] + rest, extraEnvironment: ["LD_DEBUG": "files"])
        var loaded = Set<String>()
        for line in output.stderr.split(separator: "\n") where line.contains("file=") {
            guard let start = line.range(of: "file=")?.upperBound else { continue }
            loaded.insert(String(line[start...].prefix { !$0.isWhitespace && $0 != "[" && $0 != ";" }))
        }
        return (output, loaded)
    }
}
