#if DEBUG  // Testing is not there in the release build (make release builds every target)
import Foundation
import Testing

/// A software TPM 2.0 for one test: Debian's swtpm in socket mode with a state folder of its own
/// (so a fresh TPM, with its own seeds), on two free loopback ports (swtpm takes no port 0), reached
/// through libtss2's `swtpm:` TCTI. ``stop()`` and ``start()`` keep the state: the same TPM comes
/// back. Removed, with its state, when released.
package final class SoftwareTPM: @unchecked Sendable {
    /// Set to 1 by scripts/test.sh (make test, make check): these tests must run, so a missing
    /// swtpm fails them instead of skipping.
    package static let requiredVariable = "LANYARD_TEST_TPM"

    /// Where swtpm is, or nil.
    package static let binary: String? = ["/usr/bin/swtpm", "/usr/local/bin/swtpm"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// Whether the TPM suites run: swtpm is installed, or the test scripts say it must be (then a
    /// missing swtpm fails them, loudly).
    package static var shouldRun: Bool { binary != nil || ProcessInfo.processInfo.environment[requiredVariable] == "1" }

    /// Why the TPM suites skip under plain `swift test` without swtpm.
    package static let skipReason =
        "swtpm is not installed (scripts/deps.sh installs swtpm and tpm2-tools; make test runs these tests)"

    package let stateDirectory: String
    package private(set) var port: Int = 0
    private var process: Process?
    private let log: String

    /// The TCTI string for this TPM, as TPM2TOOLS_TCTI takes it.
    package var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// Starts a fresh TPM.
    package init() throws {
        guard Self.binary != nil else {
            throw SoftwareTPMError("swtpm is not installed: run scripts/deps.sh (Debian packages swtpm, swtpm-tools)")
        }
        let base = (NSTemporaryDirectory() as NSString).standardizingPath
        var template = Array((base + "/lanyard-swtpm.XXXXXX").utf8CString)
        stateDirectory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        log = stateDirectory + "/swtpm.log"
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }

    /// Starts swtpm on the state folder (after ``stop()``: the same TPM) on free ports, and waits
    /// until it accepts connections.
    package func start() throws {
        guard process == nil, let binary = Self.binary else { return }
        var lastFailure = ""
        // Another process may take the ports between the check and swtpm's bind: try others then.
        for _ in 0..<10 {
            let port = try Self.freePortPair()
            let p = Process()
            p.executableURL = URL(fileURLWithPath: binary)
            p.arguments = [
                "socket", "--tpm2", "--tpmstate", "dir=\(stateDirectory)",
                "--server", "type=tcp,bindaddr=127.0.0.1,port=\(port)", "--ctrl",
                "type=tcp,bindaddr=127.0.0.1,port=\(port + 1)",
                "--flags", "not-need-init,startup-clear", "--log", "file=\(log),level=1",
            ]
            p.standardInput = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            let starting = "running, not accepting yet"
            let state: String
            do {
                state = try eventually("swtpm on port \(port) accepts connections") {
                    Self.accepts(port: port) ? "accepting" : p.isRunning ? starting : "exited"
                } until: {
                    $0 != starting
                }
            } catch {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
                let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? "no log"
                throw SoftwareTPMError("swtpm did not start: \(said.suffix(500))")
            }
            if state == "accepting" {
                process = p
                self.port = port
                return
            }
            p.waitUntilExit()
            lastFailure = (try? String(contentsOfFile: log, encoding: .utf8)) ?? "no log"
        }
        throw SoftwareTPMError("swtpm did not start: \(lastFailure.suffix(500))")
    }

    /// Stops swtpm (SIGKILL: it inherits a mask that blocks SIGTERM from the test process's
    /// threads, and a TPM losing power at once is what the tests mean) and waits for it; the
    /// state stays (swtpm writes it as it changes).
    package func stop() {
        guard let process else { return }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        self.process = nil
    }

    /// A port P with P and P+1 free on 127.0.0.1 now.
    private static func freePortPair() throws -> Int {
        for _ in 0..<50 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { break }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            close(fd)
            let port = Int(UInt16(bigEndian: address.sin_port))
            if bound, port > 1024, port < 65000, canBind(port + 1) { return port }
        }
        throw SoftwareTPMError("no two free loopback ports")
    }

    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

package struct SoftwareTPMError: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
#endif
